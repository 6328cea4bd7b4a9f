#include "models/parameter_set.hpp"

#include <utility>

#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::models {

Parameter ParameterSet::add(const std::string& name, std::vector<std::int64_t> shape,
                            ParameterInit init, bool weight_decay) {
  for (const auto& p : params_) {
    if (p.name == name) throw RuntimeError("parameter \"" + name + "\" is defined twice");
  }
  Parameter p{name, core::Tensor::empty(ctx_, shape, core::DType::f32, core::tags().parameter),
              core::Tensor::zeros(ctx_, shape, core::DType::f32, core::tags().gradient),
              weight_decay};
  params_.push_back(p);
  inits_.push_back(init);
  return p;
}

}  // namespace memtrain::models
