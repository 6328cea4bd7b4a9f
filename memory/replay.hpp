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
  std::size_t bytes = 0;  // alloc: requested bytes; free: 0 when the row left it empty
  StreamId stream = kDefaultStream;
  std::string tag;       // empty = untagged
  std::size_t line = 0;  // 1-based line in the source file, for messages
};

// Note [Step boundaries in a trace]
// A multi-job replay (multi_job_replay.hpp) runs several traces on one clock, and the natural
// unit of a training job's time is its step: so the trainer records a `step` event at every
// step boundary (after set-up and the first evaluation: `step,0`; after step N's evaluation,
// health check and checkpoint: `step,N`), and the CSV carries it as the row `step,N,,,`. The
// allocator never sees it, so replaying one trace ignores it, and a trace without step rows
// (older traces, RMM's logs) still reads: it is one step long. The rows are what count; their
// numbers label them (a health rollback makes them go back).

// A step row: `step` steps completed once the trace's first `op_index` alloc and free rows
// have run; `line` is the row's line in the file.
struct StepMark {
  std::uint64_t step = 0;
  std::size_t op_index = 0;
  std::size_t line = 0;
};

// Reads the replay CSV: header `op,id,bytes,stream,tag`; op is alloc|free|step; free rows may leave
// bytes and tag empty; step rows carry the step number in the id field and nothing else; `#`
// starts a comment (whole line or trailing); blank lines are skipped. Returns the alloc and free
// rows; the step rows go to `steps` when given (Note [Step boundaries in a trace]), else are
// skipped. `source` is the name used in messages. Throws TraceFormatError ("<source>:<line>:
// <what>").
std::vector<TraceOp> parse_trace_csv(std::istream& in, const std::string& source,
                                     std::vector<StepMark>* steps = nullptr);

// Reads RMM's logging_resource_adaptor CSV: header `Thread,Time,Action,Pointer,Size,Stream`,
// Action allocate|free (RMM also writes "allocate failure", which is skipped: the request never
// held memory). Streams are mapped to small ids in order of first appearance. Throws
// TraceFormatError.
std::vector<TraceOp> parse_rmm_log_csv(std::istream& in, const std::string& source);

// Opens `path` and picks the parser from the header line. Step rows go to `steps` when given
// (an RMM log has none). Throws TraceFormatError (also for a missing or unreadable file).
std::vector<TraceOp> read_trace_file(const std::string& path, std::vector<StepMark>* steps = nullptr);

// Note [Replay interns ids and tags once]
// Replay throughput is a target (issue 3, "Speed": at least 5 million events/s). Hashing an id
// string per event (twice: to check the trace and to find the live block), registering the tag
// per alloc (a mutex and a hash in the process-wide TagRegistry) and node maps for the live set
// cost as much as the allocator itself. So a trace is interned once: each distinct id text
// becomes a dense index (the live set is then a vector indexed by it) and each distinct tag an
// index into a short table that replay registers once. Replay itself does no string work.

// A trace whose ids and tags are dense integers. `ops[i]` is row i of the TraceOp list it came
// from (same order, so event indices agree); `lines[i]` is its line in the source file.
struct InternedTrace {
  struct Op {
    std::size_t bytes = 0;  // alloc: requested bytes; free: 0 when the row left it empty
    std::uint32_t id = 0;   // index into `ids`
    StreamId stream = kDefaultStream;
    std::uint32_t tag = 0;  // index into `tags`; 0 = untagged (free rows: always 0)
    bool alloc = true;
  };
  std::vector<Op> ops;
  std::vector<std::size_t> lines;
  std::vector<std::string> ids;   // id text, in order of first appearance
  std::vector<std::string> tags;  // tags[0] = "" (untagged); then alloc rows' tags by first appearance
};

// Interns `ops` (one hash lookup per row; no checks: replay_trace checks the ids). Throws
// std::length_error for more than 2^32 - 1 distinct ids or tags.
InternedTrace intern_trace(const std::vector<TraceOp>& ops);

// The requested bytes live at the fullest moment of `trace` (no allocator can do better),
// saturating at SIZE_MAX. Also checks the trace's ids: every free names a live alloc, ids are
// not reused while live, and a free's bytes, when given, match its alloc. Throws
// TraceFormatError ("<source>:<line>: ..."), std::invalid_argument for a hand-built trace
// whose tables do not fit its ops.
std::size_t peak_live_bytes(const InternedTrace& trace, const std::string& source);

// What a replay measured. Byte counts are bytes; ratios are in [0, 1].
struct ReplayReport {
  std::string policy;
  std::size_t capacity_bytes = 0;
  std::size_t events = 0;  // trace rows replayed (alloc + free)
  std::size_t num_allocs = 0;
  std::size_t num_frees = 0;
  std::size_t peak_live_bytes = 0;  // largest sum of live requested bytes: a lower bound
  std::size_t peak_allocated_bytes = 0;
  std::size_t peak_reserved_bytes = 0;
  double utilization = 0.0;    // peak_allocated / peak_reserved (0 if none reserved)
  double fragmentation = 0.0;  // at the moment of peak reserved (memory_stats.hpp)
  std::size_t num_ooms = 0;
  std::optional<std::size_t> first_oom_event;  // 0-based index of the first failed alloc
  std::optional<std::size_t> first_oom_line;   // its line in the trace file
  std::size_t num_alloc_retries = 0;

  // One JSON object with the fields above (first_oom_* are null when no OOM happened).
  std::string to_json() const;
  // A few readable lines for a terminal.
  std::string to_text() const;
};

// Policies replay_trace accepts: the CachingAllocator's (registered_policies(), in their order)
// and "planned" (the activation planner sees the whole trace: a greedy offline
// layout, Note [The planned policy is a greedy offline bound, not the optimum] in replay.cpp).
const std::vector<std::string>& replay_policies();
// replay_policies() for a message: "no_cache, pytorch, best_fit, vmm_stitch, planned".
std::string replay_policy_list();

// Replays `trace` on a simulated device of `capacity_bytes` (a simulated virtual-memory device
// for a policy that maps pages, vmm_stitch). A failed alloc is counted in num_ooms and replay continues; its later
// free is ignored. Cost: linear in the trace for the allocator policies; "planned" lays out
// the whole trace at once, O(n log n) (Note [Two layouts, each at most O(n log n)] in
// activation_planner.cpp; seconds for 10^6 blocks live at once). Throws std::invalid_argument for an unknown policy or capacity 0, and
// TraceFormatError for a trace that frees an unknown id or allocates a live id twice (or, when
// built by hand, names an id or tag index past its tables), std::invalid_argument for one whose
// lines or tags tables do not fit its ops.
ReplayReport replay_interned_trace(const InternedTrace& trace, const std::string& policy, std::size_t capacity_bytes,
                                   const std::string& source = "trace");

// intern_trace + replay_interned_trace (a separate name: `{}` would fit either overload).
ReplayReport replay_trace(const std::vector<TraceOp>& ops, const std::string& policy, std::size_t capacity_bytes,
                          const std::string& source = "trace");

// read_trace_file + intern_trace + replay_interned_trace: what `memtrain replay` calls.
ReplayReport replay_trace_file(const std::string& path, const std::string& policy, std::size_t capacity_bytes);

}  // namespace memtrain::memory
