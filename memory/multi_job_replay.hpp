#pragma once
// Several jobs' traces replayed on one simulated device, each job with its own allocator, as
// separate processes on one GPU (issue 44, section 1; `memtrain replay --workload`).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "memory/job_trace.hpp"
#include "memory/multi_job_report.hpp"

namespace memtrain::memory {

// Note [The common clock of a multi-job replay]
// Jobs of different sizes take different wall time per step, and a dry-run trace has no
// meaningful time at all, so the clock is counted in steps: one tick is one training step of
// every job that is running. A run that starts at tick t and trains s steps replays, at tick
// t + k, its trace's step k + 1 (step rows: Note [Step boundaries in a trace]); tick t also runs
// the prologue (set-up, the first evaluation) before step 1, and its last tick the epilogue (the
// final evaluation, teardown) after its last step when the trace has no more steps than the
// run. A run longer than its trace repeats a step of it in the ticks between (the last but one
// when the trace has three or more, since the last ends with the final evaluation), which must
// then be self-contained (JobTrace::check_repeatable), and ends with the trace's last step; a
// shorter run stops after step s and ends as a process that is stopped does. A job repeats
// `repeat` times, each run a new process `gap` idle ticks after the previous one ended. Within
// one tick the running jobs' rows are interleaved in proportion, as concurrent processes run:
// row i of a tick's L rows sits at (i + 1) / L of the tick, and rows at the same point go in the
// order the runs started (then the workload's order). So two jobs reach the middle of their steps together, which is when
// their activations peak.

// Note [A job that fails ends]
// A real process that runs out of memory raises and ends (PyTorch's OOM error ends the training
// script unless caught; memtrain's `train` exits 1). So a run whose request fails, after its
// own allocator has released its cache and retried and after the cross-job release below, ends
// at that row: everything it holds is freed and its segments return to the device, and it
// replays nothing more. Its job's later runs still start at their ticks. A failure is reported
// with what the other running jobs held unused at that moment ("stranded": reserved but
// unallocated, and the part of it in whole free segments that could have been released).

// Note [Cross-job release in the replay]
// On one GPU the free memory a job cannot get is often held by other processes' caches: their
// allocators keep freed segments for reuse and never learn that another process is short. With
// release on, a job whose request fails asks every other running job to empty its cache (as
// torch.cuda.empty_cache does: whole free segments go back to the device; segments that still
// hold a block stay) and retries once; only then does it fail. The replay does this at once;
// real processes answer at their next allocator call or step boundary, with a bounded wait
// (the ledger's part, issue 44 section 3). So with release no failure happens while another
// job holds releasable cache, and the bytes still stranded at a failure are free bytes inside
// segments that hold live blocks (fragmentation), which no release can return. `planned`
// reserves each job's whole arena at its start (the offline layout of its trace), caches
// nothing, and so has nothing to release.

// One job of a workload as the replay runs it.
struct ScheduledJob {
  std::string name;
  const JobTrace* trace = nullptr;  // not owned; outlives the replay
  std::uint64_t start = 0;          // tick of its first run
  std::uint64_t steps = 1;          // steps per run, at least 1
  std::uint64_t repeat = 1;         // runs, at least 1
  std::uint64_t gap = 0;            // idle ticks between the end of a run and the next
};

struct MultiJobOptions {
  bool release = true;  // Note [Cross-job release in the replay]
};

// Replays `jobs` under `policy` (replay_policies()) on one simulated device of
// `capacity_bytes` shared by all of them (a simulated virtual-memory device for a policy that
// maps pages). Each run gets its own allocator. Cost: linear in the rows replayed times the
// number of jobs running at once. Throws std::invalid_argument for an unknown policy, capacity
// 0, a job without a trace, steps 0 or repeat 0, and TraceFormatError from check_repeatable.
MultiJobReport replay_jobs(const std::vector<ScheduledJob>& jobs, const std::string& policy, std::size_t capacity_bytes,
                           const MultiJobOptions& options = {});

}  // namespace memtrain::memory
