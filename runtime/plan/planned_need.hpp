#pragma once
// The need a job with memory.admission: wait reserves in its pool (Note [Admission by plan],
// memory/shared_ledger.hpp): its dry-run peak, the planner's figure, and headroom.
#include <cstddef>

#include "runtime/config/config.hpp"

namespace memtrain::train {

// Note [Headroom over the plan]
// A plan measures the trainer's first steps (Note [A plan measures the trainer's first steps
// and evaluations]); later steps mask other numbers of tokens (binomial at
// data.mlm_probability), so the MLM head's [M, V] tensors differ in size from step to step, and
// a tensor that outgrows the cached block it had takes a segment of its own. Run alone, 2 of the
// 10 jobs of `scripts/pool_stress.sh --seed 1` held one 2 MiB segment more than their plan
// (22 against 20 MiB, 32 against 30 MiB) after their first steps; in a pool packed to its
// capacity that segment is someone else's, and the job runs out of memory. The need therefore
// adds one segment of the step's largest allocation under memory.policy (the policy's own
// rounding and segment size): room for the largest tensor to take a fresh segment once.

// The headroom: the segment memory.policy would reserve for an allocation of
// `largest_allocation` bytes. Throws std::invalid_argument for an unknown policy.
std::size_t need_headroom_bytes(const Config& config, std::size_t largest_allocation);

// The peak reserved bytes of one rank of `world_size` under memory.policy for `config` (its
// memory.recompute resolved, not auto) dry-run by measure_step (the figure `memtrain plan`
// reports as the peak reserved with no device limit), plus need_headroom_bytes for the step's
// largest allocation. Throws as measure_step.
std::size_t planned_peak_reserved_bytes(const Config& config, int world_size);

}  // namespace memtrain::train
