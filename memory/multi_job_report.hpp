#pragma once
// What a multi-job replay measured (multi_job_replay.hpp). Bytes are bytes; ratios in [0, 1].
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace memtrain::memory {

// One out-of-memory failure: the run of `job` that failed ends there (Note [A job that fails
// ends], multi_job_replay.hpp).
struct JobFailure {
  std::string job;
  std::uint64_t run = 0;   // 0-based run of the job (its repeat)
  std::uint64_t tick = 0;  // common-clock tick of the failure
  std::uint64_t step = 0;  // 1-based step of that run
  std::size_t line = 0;    // the failed alloc's line in the job's trace (0: the planned arena)
  std::size_t request_bytes = 0;
  std::size_t device_free_bytes = 0;  // capacity - every job's reserved bytes, after the failure
  // Other live jobs' reserved but unallocated bytes at the failure ("stranded"), and the part
  // of them in whole free segments, which empty_cache would have returned to the device.
  std::size_t stranded_bytes = 0;
  std::size_t stranded_releasable_bytes = 0;
  // request <= device_free + stranded_releasable: the cached memory of others would have
  // covered it (by bytes; the policy's rounding and segment sizes may still have failed it).
  bool cached_memory_would_cover = false;
};

// One job of the workload over the replay.
struct JobSummary {
  std::string name;
  std::uint64_t runs = 0;
  std::uint64_t failed_runs = 0;
  std::size_t peak_allocated_bytes = 0;  // this job's own peaks, over all its runs
  std::size_t peak_reserved_bytes = 0;
};

// One tick of the common clock, at its fullest moment (the most bytes allocated by all jobs
// within the tick), plus the tick's peak reserved bytes.
struct TickSample {
  std::uint64_t tick = 0;
  std::uint64_t active_jobs = 0;  // runs alive at the start of the tick or started in it
  std::size_t allocated_bytes = 0;
  std::size_t reserved_bytes = 0;  // at the same moment
  std::size_t peak_reserved_bytes = 0;
  std::uint64_t failures = 0;
};

struct MultiJobReport {
  std::string policy;
  std::size_t capacity_bytes = 0;
  bool release = true;  // cross-job release on (Note [Cross-job release in the replay])
  std::uint64_t ticks = 0;
  std::size_t events = 0;                // alloc and free rows replayed, over every run
  std::size_t peak_allocated_bytes = 0;  // every job together
  std::size_t peak_reserved_bytes = 0;
  double utilization = 0.0;         // peak allocated / peak reserved
  double device_utilization = 0.0;  // peak allocated / capacity
  // Means over the ticks in which anything was reserved, of each tick's fullest moment:
  // allocated / reserved and allocated / capacity.
  double mean_utilization = 0.0;
  double mean_device_utilization = 0.0;
  std::uint64_t failures = 0;
  std::uint64_t failures_cached_memory_would_cover = 0;
  std::size_t stranded_bytes_at_failures = 0;  // summed over failures
  std::size_t max_stranded_bytes = 0;
  std::uint64_t releases = 0;  // jobs' caches emptied for another job
  std::size_t released_bytes = 0;
  std::vector<JobSummary> jobs;
  std::vector<JobFailure> failure_list;
  std::vector<TickSample> timeline;

  // One JSON object with the fields above (timeline as arrays).
  std::string to_json() const;
  // A few readable lines for a terminal: the totals and one line per job.
  std::string to_text() const;
};

}  // namespace memtrain::memory
