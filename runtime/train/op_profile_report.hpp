#pragma once
// `train --profile-ops`: the op profile of the training steps as op_profile.json and as the
// step-breakdown table printed at the end of a run (Note [Profiling ops in the step]).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/core/op_profile.hpp"

namespace memtrain::train {

// The profile of `steps` training steps that took `step_seconds` of wall time in all (this
// rank's): {"steps", "step_seconds", "op_seconds", "ops": [{"op", "shape", "calls", "seconds",
// "flops", "bytes"}, ...]} slowest first. op_seconds is the sum of the ops' self times; the rest
// of step_seconds is untimed work (residual adds, row gathers, bookkeeping).
nlohmann::json op_profile_json(const core::OpProfile& profile, std::int64_t steps, double step_seconds);

// The table of op_profile_json: per op and shape, calls and milliseconds per step, the share of
// the step's wall time, and GFLOP/s (GEMMs, attention) or GB/s (the rest, from the op's minimal
// bytes); the ops below 0.5% of the step folded into one line, then the untimed rest.
std::string format_op_profile(const core::OpProfile& profile, std::int64_t steps, double step_seconds);

}  // namespace memtrain::train
