#pragma once
// The workload file of `memtrain replay --workload` (docs/workloads.md): several jobs' traces on
// one simulated device, on the common clock of memory/multi_job_replay.hpp.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memtrain::train {

// One entry of `jobs:`. Ticks and steps are steps of the common clock (Note [The common clock
// of a multi-job replay], memory/multi_job_replay.hpp).
struct WorkloadJob {
  std::string name;                    // default: the trace's file name without its extension
  std::string trace;                   // resolved against the workload file's folder
  std::size_t line = 0;                // the entry's line in the workload file (1-based)
  std::uint64_t start = 0;             // tick of its first run
  std::optional<std::uint64_t> steps;  // steps per run; default: the steps its trace recorded
  std::uint64_t repeat = 1;            // runs, one after another
  std::uint64_t gap = 0;               // idle ticks between a run's end and the next run
};

struct Workload {
  std::string path;
  std::optional<std::size_t> capacity_bytes;  // `capacity:`; --capacity overrides it
  std::vector<WorkloadJob> jobs;
};

// Reads and checks a workload file: a YAML mapping with `jobs` (a non-empty list of mappings
// with `trace` and optionally `name`, `start`, `steps`, `repeat`, `gap`) and optionally
// `capacity` (a byte size such as 80GB, at most 4 EiB). Every trace must exist (it is read later). Throws
// ConfigError "<path>:<line>: <what>; expected <what>" for anything else: not YAML, unknown or
// repeated keys, values that are not non-negative integers, steps or repeat 0, two jobs of one
// name, a trace that is missing.
Workload load_workload(const std::string& path);

}  // namespace memtrain::train
