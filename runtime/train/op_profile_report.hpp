#pragma once
// `train --profile-ops`: the op profile of the training steps as op_profile.json and as the
// step-breakdown table printed at the end of a run (Note [Profiling ops in the step]).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/core/op_profile.hpp"

namespace memtrain::train {

// What issue 15 measures the profiled steps against, measured in the same run on the same
// threads after the steps: an sgemm on the FFN's up-projection shape (sgemm_peak.hpp) for the
// step's model FLOP/s, and memcpy's bandwidth (memcpy_bandwidth.hpp) for the optimizer's GB/s.
struct StepReference {
  std::string sgemm_shape;        // e.g. "[1024, 768] x [768, 3072]"
  double sgemm_flops = 0;         // FLOP/s of that sgemm
  double memcpy_bytes_per_s = 0;  // bytes read + written per second
  double model_flops = 0;         // this rank's model FLOPs over all the profiled steps
};

// The profile of `steps` training steps that took `step_seconds` of wall time in all (this
// rank's): {"steps", "step_seconds", "op_seconds", "ops": [{"op", "shape", "calls", "seconds",
// "flops", "bytes"}, ...]} slowest first. op_seconds is the sum of the ops' self times; the rest
// of step_seconds is untimed work (residual adds, row gathers, bookkeeping).
// With `reference`, also {"reference": {"sgemm_shape", "sgemm_flops", "memcpy_bytes_per_s",
// "model_flops_per_s", "sgemm_fraction", "optimizer_memcpy_fraction"}} (the last null without an
// optimizer.step row).
nlohmann::json op_profile_json(const core::OpProfile& profile, std::int64_t steps, double step_seconds,
                               const StepReference* reference = nullptr);

// The table of op_profile_json: per op and shape, calls and milliseconds per step, the share of
// the step's wall time, and GFLOP/s (GEMMs, attention) or GB/s (the rest, from the op's minimal
// bytes); the ops below 0.5% of the step folded into one line, then the untimed rest; with
// `reference`, two more lines: the reference speeds, and the step's model FLOP/s and the
// optimizer's GB/s as fractions of them.
std::string format_op_profile(const core::OpProfile& profile, std::int64_t steps, double step_seconds,
                              const StepReference* reference = nullptr);

}  // namespace memtrain::train
