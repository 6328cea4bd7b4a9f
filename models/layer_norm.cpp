#include "models/layer_norm.hpp"

#include "kernels/cpu/layernorm.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::models {

LayerNorm::LayerNorm(ParameterSet& params, const std::string& name, int C, float eps)
    : gamma_(params.add(name + ".weight", {C}, ParameterInit::ones, /*weight_decay=*/false)),
      beta_(params.add(name + ".bias", {C}, ParameterInit::zeros, /*weight_decay=*/false)),
      C_(C),
      eps_(eps) {}

core::Tensor LayerNorm::forward(PassState& s, const core::Tensor& x, int N) {
  const auto tag = core::tags().activation;
  auto out = core::Tensor::empty(s.ctx, {N, C_}, core::DType::f32, tag);  // [N, C]
  auto mean = core::Tensor::empty(s.ctx, {N}, core::DType::f32, tag);     // [N]
  auto rstd = core::Tensor::empty(s.ctx, {N}, core::DType::f32, tag);     // [N]
  if (s.compute()) {
    kernels::layernorm_forward(out.data<float>(), mean.data<float>(), rstd.data<float>(),
                               x.data<float>(), gamma_.value.data<float>(),
                               beta_.value.data<float>(), N, C_, eps_);
  }
  if (s.training) {
    x_ = x;
    mean_ = std::move(mean);
    rstd_ = std::move(rstd);
  }
  return out;
}

void LayerNorm::backward(PassState& s, float* dx, const float* dout, int N) {
  if (s.compute()) {
    kernels::layernorm_backward(dx, gamma_.grad.data<float>(), beta_.grad.data<float>(), dout,
                                x_.data<float>(), gamma_.value.data<float>(), mean_.data<float>(),
                                rstd_.data<float>(), N, C_);
  }
  release();
}

void LayerNorm::release() {
  x_.reset();
  mean_.reset();
  rstd_.reset();
}

}  // namespace memtrain::models
