#pragma once
// What a run leaves about its memory (design.md, "Outputs of a run").
#include "memory/caching_allocator.hpp"
#include "memory/trace_recorder.hpp"
#include "runtime/train/run_directory.hpp"

namespace memtrain::train {

// run_dir/memory_snapshot.json: the allocator's segments and blocks at the end of the run in
// the shape of PyTorch's torch.cuda.memory._snapshot() (memory::memory_snapshot_json), with the
// recorded events as its device trace when `trace` is given (memory.trace: true). With a trace,
// also run_dir/memory_trace.json: allocated/reserved bytes per tag as Chrome trace counters
// (memory::chrome_trace_json; open in Perfetto), and run_dir/memory_trace.csv: every alloc
// and free in the replay CSV format (`op,id,bytes,stream,tag`, memory::write_trace_csv), so
// that `memtrain replay --trace run_dir/memory_trace.csv --policy P --capacity SIZE` replays
// the run's requests under another policy or device size. Each file is written through a
// temporary file and a rename (write_file_atomically), so a failed write never replaces a good
// file with a partial one. Throws RuntimeError, with the OS reason, when a file cannot be
// written.
void write_memory_outputs(const memory::CachingAllocator& allocator, const memory::TraceRecorder* trace,
                          const RunDirectory& run_dir);

}  // namespace memtrain::train
