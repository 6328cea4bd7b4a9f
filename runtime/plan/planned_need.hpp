#pragma once
// The need a job with memory.admission: wait reserves in its pool (Note [Admission by plan],
// memory/shared_ledger.hpp): its dry-run peak, the planner's figure.
#include <cstddef>

#include "runtime/config/config.hpp"

namespace memtrain::train {

// The peak reserved bytes of one rank of `world_size` under memory.policy for `config` (its
// memory.recompute resolved, not auto): the trainer's first steps and evaluations dry-run by
// measure_step (Note [A plan measures the trainer's first steps and evaluations]), the figure
// `memtrain plan` reports as the peak reserved with no device limit. Throws as measure_step.
std::size_t planned_peak_reserved_bytes(const Config& config, int world_size);

}  // namespace memtrain::train
