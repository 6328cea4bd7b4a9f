#include "runtime/train/make_optimizer.hpp"

#include <string>
#include <vector>

#include "runtime/config/component_registry.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/train/optimizer_registry.hpp"

namespace memtrain::train {
namespace {

std::string one_of(const std::vector<std::string>& names) {
  std::string s;
  for (std::size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
  return "one of " + s;
}

}  // namespace

comms::GradientReduction gradient_reduction(const Config& config) {
  return config.parallel.zero_stage == 1 ? comms::GradientReduction::reduce_scatter
                                         : comms::GradientReduction::all_reduce;
}

std::optional<comms::GradientSynchronizer::Compression> gradient_compression(const Config& config) {
  const auto& k = config.compression;
  if (k.method == "none") return std::nullopt;
  const CompressorEntry* entry = find_compressor(k.method);
  if (entry == nullptr) {
    std::vector<std::string> names = {"none"};
    for (const auto& n : compressor_names()) names.push_back(n);
    throw ConfigError("compression.method = " + k.method + ": no compressor of that name is registered; expected " +
                      one_of(names));
  }
  comms::GradientSynchronizer::Compression c;
  c.make = entry->make(config);
  c.start_iter = k.start_iter;
  return c;
}

std::unique_ptr<Optimizer> make_optimizer(const Config& config, models::BertForMaskedLM& model,
                                          comms::GradientSynchronizer& sync, comms::Communicator& dp,
                                          core::Context& ctx, comms::Communicator* tp_group) {
  const OptimizerInputs inputs{model, sync, dp, ctx, tp_group};
  std::vector<std::string> names;
  for (const auto& b : optimizer_builders()) {
    if (b.name == config.training.optimizer) return b.make(config, inputs);
    names.push_back(b.name);
  }
  throw ConfigError("training.optimizer = " + config.training.optimizer +
                    ": no optimizer of that name is built; expected " + one_of(names));
}

void init_parameters(models::BertForMaskedLM& model, Optimizer& optimizer, std::uint64_t seed) {
  if (optimizer.takes_initial_draws()) {
    model.init_parameters(seed, [&optimizer](std::size_t i, const float* draw) { optimizer.init_master(i, draw); });
    return;
  }
  model.init_parameters(seed);
}

}  // namespace memtrain::train
