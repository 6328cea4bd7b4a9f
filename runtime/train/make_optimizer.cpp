#include "runtime/train/make_optimizer.hpp"

#include "runtime/train/onebit_adam.hpp"
#include "runtime/train/zero_adamw.hpp"

namespace memtrain::train {

comms::GradientReduction gradient_reduction(const Config& config) {
  return config.parallel.zero_stage == 1 ? comms::GradientReduction::reduce_scatter
                                         : comms::GradientReduction::all_reduce;
}

comms::OneBitOptions onebit_options(const Config& config) {
  const auto& k = config.compression;
  return {k.block_size, k.scale == "rms" ? comms::OneBitScale::rms : comms::OneBitScale::mean_abs};
}

std::optional<comms::GradientSynchronizer::Compression> gradient_compression(const Config& config) {
  const auto& k = config.compression;
  if (k.method == "none") return std::nullopt;
  comms::GradientSynchronizer::Compression c;
  c.method = k.method == "onebit" ? comms::GradientSynchronizer::CompressionMethod::onebit
                                  : comms::GradientSynchronizer::CompressionMethod::powersgd;
  c.powersgd.rank = k.rank;
  c.powersgd.min_compression_rate = k.min_compression_rate;
  c.powersgd.warm_start = k.warm_start;
  c.powersgd.seed = config.training.seed;
  c.onebit = onebit_options(config);
  c.start_iter = k.start_iter;
  return c;
}

std::unique_ptr<Optimizer> make_optimizer(const Config& config, models::BertForMaskedLM& model,
                                          comms::GradientSynchronizer& sync, comms::Communicator& dp,
                                          core::Context& ctx, comms::Communicator* tp_group) {
  const auto& tc = config.training;
  const AdamWOptions options{tc.adam_beta1, tc.adam_beta2, tc.adam_eps, tc.weight_decay};
  if (tc.optimizer == "onebit_adam") {
    return std::make_unique<OneBitAdam>(
        model.parameters(), model.gradient_buckets(), sync, dp, ctx, options,
        OneBitAdamOptions{config.compression.freeze_step, onebit_options(config), config.training.seed});
  }
  if (config.parallel.zero_stage == 1) {
    return std::make_unique<ZeroAdamW>(model.parameters(), model.gradient_buckets(), sync, dp, ctx, options, tp_group);
  }
  return std::make_unique<AdamW>(model.parameters(), ctx, options, tp_group);
}

void init_parameters(models::BertForMaskedLM& model, Optimizer& optimizer, std::uint64_t seed) {
  if (auto* zero = dynamic_cast<ZeroAdamW*>(&optimizer)) {
    model.init_parameters(seed, [zero](std::size_t i, const float* draw) { zero->init_master(i, draw); });
    return;
  }
  model.init_parameters(seed);
}

}  // namespace memtrain::train
