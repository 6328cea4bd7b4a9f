#include "runtime/plan/plan_layer_activation.hpp"

#include "models/model_options.hpp"
#include "runtime/config/model_options_from_config.hpp"

namespace memtrain::train {
namespace {

std::int64_t per_layer_of(const Config& config, int world_size) {
  return measure_activation_bytes_per_layer(config, world_size, measure_step(config, world_size));
}

}  // namespace

LayerActivationBytes measure_layer_activation_bytes(const Config& config, int world_size, const StepMeasurement& full) {
  LayerActivationBytes r;
  r.num_layers = config.model.num_hidden_layers;
  const models::ModelOptions options = model_options(config);
  for (int layer = 0; layer < r.num_layers; ++layer) {
    if (models::recomputes_layer(options, layer, r.num_layers)) ++r.checkpointed_layers;
  }
  if (r.checkpointed_layers == 0) {
    r.not_checkpointed = measure_activation_bytes_per_layer(config, world_size, full);
  } else if (r.checkpointed_layers == r.num_layers) {
    r.checkpointed = measure_activation_bytes_per_layer(config, world_size, full);
  } else {
    // Note [Per-layer activations under partial recompute]
    Config every = config;
    every.memory.recompute_num_layers = 0;
    r.checkpointed = per_layer_of(every, world_size);
    Config none = config;
    none.memory.recompute = "none";
    none.memory.recompute_num_layers = 0;
    none.memory.recompute_method = "uniform";
    r.not_checkpointed = per_layer_of(none, world_size);
  }
  return r;
}

}  // namespace memtrain::train
