#include "models/layer_norm.hpp"
#include "models/op_descriptions.hpp"

#include "kernels/ops/layernorm.hpp"
#include "models/f32_access.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::models {

LayerNorm::LayerNorm(ParameterSet& params, const std::string& name, int C, float eps)
    : gamma_(params.add(name + ".weight", {C}, ParameterInit::ones, /*weight_decay=*/false)),
      beta_(params.add(name + ".bias", {C}, ParameterInit::zeros, /*weight_decay=*/false)),
      C_(C),
      eps_(eps) {}

core::Tensor LayerNorm::forward(PassState& s, const core::Tensor& x, int N, const float* x_f) {
  const auto tag = core::tags().activation;
  auto out = core::Tensor::empty(s.ctx, {N, C_}, s.dtype, tag);  // [N, C]
  // Statistics stay f32 in every mode, as Megatron-LM's fused LayerNorm keeps them: rstd of a
  // near-constant row needs more than bf16's 8 bits, and they are only [N].
  auto mean = core::Tensor::empty(s.ctx, {N}, core::DType::f32, tag);  // [N]
  auto rstd = core::Tensor::empty(s.ctx, {N}, core::DType::f32, tag);  // [N]
  if (s.compute()) {
    auto out_f = write_f32(s.ctx, out);
    const F32View x_view = x_f != nullptr ? F32View() : F32View(s.ctx, x, F32Access::read);  // [N, C]
    const core::ScopedOp op(s.ctx.op_profile(), "layernorm.forward", [&] { return elementwise_description(N, C_, 2); });
    kernels::ops::layernorm_forward(s.kc(), out_f.get(), mean.data<float>(), rstd.data<float>(),
                                    x_f != nullptr ? x_f : x_view.get(), read_f32(s.ctx, gamma_.value).get(),
                                    read_f32(s.ctx, beta_.value).get(), N, C_, eps_);
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
    auto dgamma = update_f32(s.ctx, gamma_.grad);  // [C]
    auto dbeta = update_f32(s.ctx, beta_.grad);    // [C]
    const core::ScopedOp op(s.ctx.op_profile(), "layernorm.backward",
                            [&] { return elementwise_description(N, C_, 3); });
    kernels::ops::layernorm_backward(s.kc(), dx, dgamma.get(), dbeta.get(), dout, read_f32(s.ctx, x_).get(),
                                     read_f32(s.ctx, gamma_.value).get(), mean_.data<float>(), rstd_.data<float>(), N,
                                     C_);
  }
  release();
}

void LayerNorm::release() {
  x_.reset();
  mean_.reset();
  rstd_.reset();
}

}  // namespace memtrain::models
