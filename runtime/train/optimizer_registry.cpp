#include "runtime/train/optimizer_registry.hpp"

namespace memtrain::train {

// The registration list: a new optimizer adds its line here and its settings to
// runtime/config/component_registry.cpp (a test holds that both list the same names).
const std::vector<OptimizerBuilder>& optimizer_builders() {
  static const std::vector<OptimizerBuilder> builders = {
      {"adamw", make_adamw},
      {"onebit_adam", make_onebit_adam},
  };
  return builders;
}

}  // namespace memtrain::train
