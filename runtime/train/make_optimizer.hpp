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

// The synchroniser's compression for compression.method (none: nullopt): the registered
// compressor of that name (runtime/config/component_registry.hpp) built from the config, from
// compression.start_iter on. Throws ConfigError naming the registered methods for another name.
std::optional<comms::GradientSynchronizer::Compression> gradient_compression(const Config& config);

// The registered optimizer named by training.optimizer (optimizer_registry.hpp: AdamW, or
// ZeroAdamW over `dp` under zero_stage 1; OneBitAdam), with the training section's Adam
// settings; `sync` must have been built with gradient_reduction(config). Everything passed
// must outlive the optimizer. Throws ConfigError naming the registered optimizers for another
// name.
std::unique_ptr<Optimizer> make_optimizer(const Config& config, models::BertForMaskedLM& model,
                                          comms::GradientSynchronizer& sync, comms::Communicator& dp,
                                          core::Context& ctx, comms::Communicator* tp_group);

// model.init_parameters(seed), handing each draw to the optimizer's own masters when it keeps
// them (Optimizer::takes_initial_draws: ZeRO-1, Note [ZeRO-1 shards the buckets]).
void init_parameters(models::BertForMaskedLM& model, Optimizer& optimizer, std::uint64_t seed);

}  // namespace memtrain::train
