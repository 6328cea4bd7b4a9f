#pragma once
// AdamW over a model's parameters, with global-norm gradient clipping.
#include <cstdint>
#include <vector>

#include "models/parameter.hpp"
#include "runtime/core/context.hpp"
#include "runtime/core/tensor.hpp"

namespace memtrain::train {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  // applied only to parameters with Parameter::weight_decay
};

// AdamW (Loshchilov & Hutter 2019, Algorithm 2, in torch.optim.AdamW's formulation; the update
// itself is kernels::adamw_update). The first and second moments m, v are fp32 tensors shaped
// like each parameter, allocated from `ctx` under the tag optimizer_state (so memory stats
// show what the optimizer costs: 2 x the parameter bytes).
// Holds a reference to `params`: it must outlive the optimizer and keep its order and size.
class AdamW {
 public:
  AdamW(std::vector<models::Parameter>& params, core::Context& ctx, AdamWOptions options);

  // Global L2 norm of all gradients, sqrt(sum_p sum_i g_i^2) accumulated in double.
  double grad_norm() const;

  // torch.nn.utils.clip_grad_norm_: when max_norm > 0, scales every gradient by
  // min(1, max_norm / (norm + 1e-6)). Returns the norm before clipping. max_norm <= 0 only
  // measures the norm.
  double clip_grad_norm(double max_norm);

  // One update with learning rate `lr` (bias correction uses the step count, from 1).
  void step(double lr);

  std::int64_t step_count() const { return step_; }
  // The moments of parameter i (for checkpoints and tests): [same shape as the parameter].
  const core::Tensor& exp_avg(std::size_t i) const { return m_[i]; }
  const core::Tensor& exp_avg_sq(std::size_t i) const { return v_[i]; }

 private:
  std::vector<models::Parameter>& params_;
  AdamWOptions options_;
  std::vector<core::Tensor> m_;
  std::vector<core::Tensor> v_;
  std::int64_t step_ = 0;
};

}  // namespace memtrain::train
