#pragma once
// What a run leaves about its memory: run_dir/memory_snapshot.json always, and with
// memory.trace the allocation trace run_dir/memory_trace.json (design.md, "Outputs of a run").
#include <vector>

#include "memory/caching_allocator.hpp"
#include "memory/trace_event.hpp"
#include "runtime/train/run_directory.hpp"

namespace memtrain::train {

// Records every event of an allocator from attach() on. Memory grows with the number of
// allocations (about 48 bytes each), which is why tracing is opt-in (memory.trace).
class MemoryTrace {
 public:
  MemoryTrace() = default;
  ~MemoryTrace();  // detaches, so an allocator outliving the trace never calls into it
  MemoryTrace(const MemoryTrace&) = delete;
  MemoryTrace& operator=(const MemoryTrace&) = delete;

  void attach(memory::CachingAllocator& allocator);
  bool attached() const { return allocator_ != nullptr; }
  const std::vector<memory::TraceEvent>& events() const { return events_; }

 private:
  memory::CachingAllocator* allocator_ = nullptr;
  std::vector<memory::TraceEvent> events_;
};

// memory_snapshot.json: {"segments": [...], "stats": {...}} (segments in the shape of
// PyTorch's torch.cuda.memory._snapshot(), stats with memory_stats() names) and, when `trace`
// is attached, memory_trace.json in the Chrome trace event format (an "allocated_bytes" and a
// "reserved_bytes" counter, open in Perfetto). Throws RuntimeError when a file cannot be written.
void write_memory_outputs(const memory::CachingAllocator& allocator, const MemoryTrace& trace,
                          const RunDirectory& run_dir);

}  // namespace memtrain::train
