#pragma once
// How each registered optimizer is built (training.optimizer). Its name, keys and checks are
// the config layer's (runtime/config/component_registry.hpp); this list pairs each name with
// the function that builds it, which lives in the optimizer's own file.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comms/communicator.hpp"
#include "comms/gradient_synchronizer.hpp"
#include "models/bert_for_masked_lm.hpp"
#include "runtime/config/config.hpp"
#include "runtime/core/context.hpp"
#include "runtime/train/optimizer.hpp"

namespace memtrain::train {

// What an optimizer is built over; every reference must outlive it. `sync` was built with
// gradient_reduction(config) (make_optimizer.hpp); tp_group: the tensor-parallel group (null:
// none).
struct OptimizerInputs {
  models::BertForMaskedLM& model;
  comms::GradientSynchronizer& sync;
  comms::Communicator& dp;
  core::Context& ctx;
  comms::Communicator* tp_group;
};

// Builds the optimizer for `config` (whose training.optimizer is its name) over `inputs`.
// Throws what its constructor throws.
using OptimizerMaker = std::function<std::unique_ptr<Optimizer>(const Config& config, const OptimizerInputs& inputs)>;

struct OptimizerBuilder {
  std::string name;  // as in the config layer's optimizer_registry()
  OptimizerMaker make;
};

// Every built optimizer, in the config registry's order (optimizer_registry.cpp lists them).
const std::vector<OptimizerBuilder>& optimizer_builders();

// One per optimizer, defined in its own file: AdamW, or ZeroAdamW under parallel.zero_stage 1
// (zero_adamw.cpp); OneBitAdam (onebit_adam.cpp).
std::unique_ptr<Optimizer> make_adamw(const Config& config, const OptimizerInputs& inputs);
std::unique_ptr<Optimizer> make_onebit_adam(const Config& config, const OptimizerInputs& inputs);

}  // namespace memtrain::train
