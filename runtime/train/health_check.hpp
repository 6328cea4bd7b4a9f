#pragma once
// Health checks of a running job: replicas that must hold equal parameters are compared, and
// the faults tests inject (MEMTRAIN_FAULT nan_grad, flip_param) are applied here
// (docs/checkpoints.md, "Health checks").
#include <cstdint>
#include <string>
#include <vector>

#include "comms/process_grid.hpp"
#include "models/bert_for_masked_lm.hpp"
#include "models/parameter.hpp"

namespace memtrain::train {

// Note [Replicas are compared before their state spreads]
// Data-parallel replicas hold bitwise-equal parameters (the same summed gradients, the same
// update), and so do the replicated parameters of a tensor-parallel group. Memory that flips a
// bit on one rank breaks that silently, and the next all-reduce mixes the damage into every
// replica's gradients. So every health.consistency_interval steps each rank hashes its
// parameter bytes (XXH64) and the group compares the digests, before a checkpoint of that step
// is written. A disagreement rolls the whole job back to the newest checkpoint no later than
// the last step whose check passed: a checkpoint written between two checks may already hold
// the damage (data-parallel rank 0 writes it).

// XXH64 over the stored bytes of the values (and fp32 masters) of `params`, in order; with
// `replicated_only` only those Sharding::replicated.
std::uint64_t parameter_digest(const std::vector<models::Parameter>& params, bool replicated_only);

// The replicas of this rank's groups compared (collective over grid.world()): every
// data-parallel group on all parameters, every tensor-parallel group on its replicated ones.
// Returns "" when all agree on every rank, else (on every rank) one line naming the step, the
// group and the world ranks whose digest differs from the majority (both, with two replicas).
std::string check_replicas(const std::vector<models::Parameter>& params, comms::ProcessGrid& grid, std::int64_t step);

// Whether every value (and fp32 master) of `params` on every rank is finite (collective over
// grid.world()): "" when they are, else one line naming the step and how many elements are
// inf or NaN. Reads the stored bits (f32, f16 or bf16: an all-ones exponent), copied from a GPU.
std::string check_finite(const std::vector<models::Parameter>& params, comms::ProcessGrid& grid, std::int64_t step);

// MEMTRAIN_FAULT=nan_grad: element 0 of the first parameter's gradient becomes NaN.
void inject_nan_gradient(models::BertForMaskedLM& model);

// MEMTRAIN_FAULT=flip_param: bit 22 of element 0 of the first parameter's value (bit 9 of a
// 16-bit value) flips, and of its fp32 master when it has one, as a memory error would.
void flip_parameter_bit(models::BertForMaskedLM& model);

}  // namespace memtrain::train
