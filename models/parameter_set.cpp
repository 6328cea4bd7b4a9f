#include "models/parameter_set.hpp"

#include <utility>

#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::models {

Parameter ParameterSet::add(const std::string& name, std::vector<std::int64_t> shape,
                            ParameterInit init, bool weight_decay, ShardSpec shard) {
  for (const auto& p : params_) {
    if (p.name == name) throw RuntimeError("parameter \"" + name + "\" is defined twice");
  }
  const core::DType dtype = options_.compute_dtype;
  const core::DType grad_dtype = options_.fp32_grad_accumulation ? core::DType::f32 : dtype;
  Parameter p;
  p.name = name;
  p.value = core::Tensor::empty(ctx_, shape, dtype, core::tags().parameter);
  p.grad = core::Tensor::zeros(ctx_, shape, grad_dtype, core::tags().gradient);
  p.weight_decay = weight_decay;
  p.shard = shard;
  if (dtype != core::DType::f32) {
    p.master = core::Tensor::empty(ctx_, shape, core::DType::f32, core::tags().master_weight);
  }
  params_.push_back(p);
  inits_.push_back(init);
  return p;
}

}  // namespace memtrain::models
