#include "runtime/train/optimizer.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/adamw.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::train {

AdamW::AdamW(std::vector<models::Parameter>& params, core::Context& ctx, AdamWOptions options)
    : params_(params), options_(options) {
  m_.reserve(params.size());
  v_.reserve(params.size());
  for (const auto& p : params) {
    m_.push_back(core::Tensor::zeros(ctx, p.value.shape(), core::DType::f32,
                                     core::tags().optimizer_state));
    v_.push_back(core::Tensor::zeros(ctx, p.value.shape(), core::DType::f32,
                                     core::tags().optimizer_state));
  }
}

double AdamW::grad_norm() const {
  // A dry run's tensors have addresses but no bytes (design.md, "Execution modes").
  if (!params_.empty() && params_.front().grad.dry_run()) return 0.0;
  double sum = 0.0;
  for (const auto& p : params_) sum += kernels::sum_of_squares(p.grad.data<float>(), p.grad.numel());
  return std::sqrt(sum);
}

double AdamW::clip_grad_norm(double max_norm) {
  const double norm = grad_norm();
  if (max_norm > 0.0) {
    const double scale = std::min(1.0, max_norm / (norm + 1e-6));
    if (scale < 1.0) {
      for (auto& p : params_) {
        kernels::scale_inplace(p.grad.data<float>(), p.grad.numel(), static_cast<float>(scale));
      }
    }
  }
  return norm;
}

void AdamW::step(double lr) {
  ++step_;
  if (!params_.empty() && params_.front().value.dry_run()) return;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    auto& p = params_[i];
    const double wd = p.weight_decay ? options_.weight_decay : 0.0;
    kernels::adamw_update(p.value.data<float>(), p.grad.data<float>(), m_[i].data<float>(),
                          v_[i].data<float>(), p.value.numel(), static_cast<float>(lr),
                          static_cast<float>(options_.beta1), static_cast<float>(options_.beta2),
                          static_cast<float>(options_.eps), static_cast<float>(wd), step_);
  }
}

}  // namespace memtrain::train
