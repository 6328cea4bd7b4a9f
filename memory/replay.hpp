#pragma once
// Replays an allocation trace against a policy on a simulated device (issue 3, "Replay").
#include <cstddef>
#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "memory/trace_format_error.hpp"
#include "memory/types.hpp"

namespace memtrain::memory {

// One row of a trace. `id` names a live allocation (RMM logs: the pointer text).
struct TraceOp {
  enum class Kind { alloc, free };
  Kind kind = Kind::alloc;
  std::string id;
  std::size_t bytes = 0;     // alloc: requested bytes; free: 0 when the row left it empty
  StreamId stream = kDefaultStream;
  std::string tag;           // empty = untagged
  std::size_t line = 0;      // 1-based line in the source file, for messages
};

// Reads the replay CSV: header `op,id,bytes,stream,tag`; op is alloc|free; free rows may leave
// bytes and tag empty; `#` starts a comment (whole line or trailing); blank lines are skipped.
// `source` is the name used in messages. Throws TraceFormatError ("<source>:<line>: <what>").
std::vector<TraceOp> parse_trace_csv(std::istream& in, const std::string& source);

// Reads RMM's logging_resource_adaptor CSV: header `Thread,Time,Action,Pointer,Size,Stream`,
// Action allocate|free (RMM also writes "allocate failure", which is skipped: the request never
// held memory). Streams are mapped to small ids in order of first appearance. Throws
// TraceFormatError.
std::vector<TraceOp> parse_rmm_log_csv(std::istream& in, const std::string& source);

// Opens `path` and picks the parser from the header line. Throws TraceFormatError (also for a
// missing or unreadable file).
std::vector<TraceOp> read_trace_file(const std::string& path);

// What a replay measured. Byte counts are bytes; ratios are in [0, 1].
struct ReplayReport {
  std::string policy;
  std::size_t capacity_bytes = 0;
  std::size_t events = 0;                 // trace rows replayed (alloc + free)
  std::size_t num_allocs = 0;
  std::size_t num_frees = 0;
  std::size_t peak_live_bytes = 0;        // largest sum of live requested bytes: a lower bound
  std::size_t peak_allocated_bytes = 0;
  std::size_t peak_reserved_bytes = 0;
  double utilization = 0.0;               // peak_allocated / peak_reserved (0 if none reserved)
  double fragmentation = 0.0;             // at the moment of peak reserved (memory_stats.hpp)
  std::size_t num_ooms = 0;
  std::optional<std::size_t> first_oom_event;  // 0-based index of the first failed alloc
  std::optional<std::size_t> first_oom_line;   // its line in the trace file
  std::size_t num_alloc_retries = 0;

  // One JSON object with the fields above (first_oom_* are null when no OOM happened).
  std::string to_json() const;
  // A few readable lines for a terminal.
  std::string to_text() const;
};

// Policies replay_trace accepts: the CachingAllocator's ("no_cache", "pytorch", "best_fit",
// "vmm_stitch") and "planned" (the activation planner sees the whole trace: the offline optimum).
const std::vector<std::string>& replay_policies();

// Replays `ops` on a simulated device of `capacity_bytes` (vmm_stitch: a simulated
// virtual-memory device). A failed alloc is counted in num_ooms and replay continues; its later
// free is ignored. Cost: linear in the trace for the allocator policies; "planned" lays out
// the whole trace at once, O(n log n + overlapping pairs) (about a minute for 10^6 events with
// thousands of tensors live at once). Throws std::invalid_argument for an unknown policy or capacity 0, and
// TraceFormatError for a trace that frees an unknown id or allocates a live id twice.
ReplayReport replay_trace(const std::vector<TraceOp>& ops, const std::string& policy,
                          std::size_t capacity_bytes, const std::string& source = "trace");

// read_trace_file + replay_trace: what `memtrain replay` calls.
ReplayReport replay_trace_file(const std::string& path, const std::string& policy,
                               std::size_t capacity_bytes);

}  // namespace memtrain::memory
