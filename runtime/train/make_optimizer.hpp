#pragma once
// The optimizer and gradient reduction that parallel.zero_stage asks for, as the trainer and
// the planner build them.
#include <cstdint>
#include <memory>
#include <optional>

#include "comms/communicator.hpp"
#include "comms/gradient_synchronizer.hpp"
#include "models/bert_for_masked_lm.hpp"
#include "runtime/config/config.hpp"
#include "runtime/core/context.hpp"
#include "runtime/train/optimizer.hpp"

namespace memtrain::train {

// all_reduce for zero_stage 0, reduce_scatter for 1.
comms::GradientReduction gradient_reduction(const Config& config);

// The synchroniser's compression for compression.method (none: nullopt): PowerSGD with the
// compression section's options and training.seed for the initial Q.
std::optional<comms::GradientSynchronizer::Compression> gradient_compression(const Config& config);
// compression.block_size and compression.scale, for the gradient compressor and 1-bit Adam.
comms::OneBitOptions onebit_options(const Config& config);

// AdamW (zero_stage 0), ZeroAdamW over `dp` (1) or OneBitAdam (training.optimizer onebit_adam,
// compression.freeze_step), with the training section's Adam settings;
// `sync` must have been built with gradient_reduction(config). Everything passed must outlive
// the optimizer.
std::unique_ptr<Optimizer> make_optimizer(const Config& config, models::BertForMaskedLM& model,
                                          comms::GradientSynchronizer& sync, comms::Communicator& dp,
                                          core::Context& ctx, comms::Communicator* tp_group);

// model.init_parameters(seed), handing each draw to a ZeroAdamW's masters when the optimizer is
// one (Note [ZeRO-1 shards the buckets]).
void init_parameters(models::BertForMaskedLM& model, Optimizer& optimizer, std::uint64_t seed);

}  // namespace memtrain::train
