#pragma once
// Activation bytes per encoder layer, for checkpointed and for stored layers apart (issue 4,
// "memtrain plan": measured against Korthikanti et al. 2022, Table 2).
#include <cstdint>
#include <optional>

#include "runtime/config/config.hpp"
#include "runtime/plan/plan_step.hpp"

namespace memtrain::train {

// Note [Per-layer activations under partial recompute]
// With memory.recompute_num_layers = k > 0 only some layers are checkpointed (every k-th, or
// the first k), so "the peak of L layers minus that of L - 1" measures whichever kind the last
// layer is, and comparing it with the recompute's row of Table 2 compares unlike things
// (QA: 402,718,720 bytes of a stored layer against full recompute's 2sbh). Each kind is
// therefore measured on a model made of that kind only: the config with every layer
// checkpointed (recompute_num_layers 0) and with none (recompute none), each as L minus L - 1.
// A kind that the config does not have is absent.
struct LayerActivationBytes {
  int checkpointed_layers = 0;  // layers of the config that memory.recompute applies to
  int num_layers = 0;
  std::optional<std::int64_t> checkpointed;      // bytes one checkpointed layer keeps
  std::optional<std::int64_t> not_checkpointed;  // bytes one stored (not checkpointed) layer keeps
  bool partial() const { return checkpointed.has_value() && not_checkpointed.has_value(); }
};

// Measures both kinds for `config` on one rank of `world_size` (dry runs, plan_step.hpp).
// `full` is measure_step(config, world_size), reused when every layer is of one kind. A
// one-layer model gives 0 for its kind (nothing to subtract from).
LayerActivationBytes measure_layer_activation_bytes(const Config& config, int world_size, const StepMeasurement& full);

}  // namespace memtrain::train
