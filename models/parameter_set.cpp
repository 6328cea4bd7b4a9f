#include "models/parameter_set.hpp"

#include <algorithm>
#include <utility>

#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::models {

Parameter ParameterSet::add(const std::string& name, std::vector<std::int64_t> shape, ParameterInit init,
                            bool weight_decay, ShardSpec shard) {
  for (const auto& p : params_) {
    if (p.name == name) throw RuntimeError("parameter \"" + name + "\" is defined twice");
  }
  const core::DType dtype = options_.compute_dtype;
  const core::DType grad_dtype = options_.fp32_grad_accumulation ? core::DType::f32 : dtype;
  Parameter p;
  p.name = name;
  p.value = core::Tensor::empty(ctx_, shape, dtype, core::tags().parameter);
  p.grad = bucketed_ ? core::Tensor::unbound(shape, grad_dtype)
                     : core::Tensor::zeros(ctx_, shape, grad_dtype, core::tags().gradient);
  p.weight_decay = weight_decay;
  p.shard = shard;
  if (dtype != core::DType::f32 && options_.master_weights) {
    p.master = core::Tensor::empty(ctx_, shape, core::DType::f32, core::tags().master_weight);
  }
  params_.push_back(p);
  inits_.push_back(init);
  return p;
}

void ParameterSet::pack_gradients(const std::vector<std::size_t>& order, const std::vector<std::size_t>& split_rows) {
  if (!bucketed_ || !buckets_.empty()) {
    throw RuntimeError("ParameterSet::pack_gradients: the set is not bucketed or is packed already");
  }
  std::vector<bool> seen(params_.size(), false);
  std::vector<comms::GradientSpec> specs;
  specs.reserve(order.size());
  for (std::size_t i : order) {
    if (i >= params_.size() || seen[i]) {
      throw RuntimeError("ParameterSet::pack_gradients: index " + std::to_string(i) + " is out of range or repeated");
    }
    seen[i] = true;
    const bool split = std::find(split_rows.begin(), split_rows.end(), i) != split_rows.end();
    specs.push_back(comms::GradientSpec{i, params_[i].name, params_[i].grad.shape(), split});
  }
  if (specs.size() != params_.size()) {
    throw RuntimeError("ParameterSet::pack_gradients: the order names " + std::to_string(specs.size()) + " of " +
                       std::to_string(params_.size()) + " parameters");
  }
  if (params_.empty()) return;
  buckets_ = comms::make_gradient_buckets(ctx_, specs, params_.front().grad.dtype(), options_.gradient_bucket_bytes);
  for (auto& bucket : buckets_) {
    for (const auto& e : bucket.entries) params_[e.key].grad.bind(bucket.buffer, e.offset);
  }
}

}  // namespace memtrain::models
