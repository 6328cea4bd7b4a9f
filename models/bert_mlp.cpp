#include "models/bert_mlp.hpp"

#include <cstring>

#include "kernels/cpu/dropout.hpp"
#include "kernels/cpu/gelu.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::models {

using core::DType;
using core::Tensor;

BertMlp::BertMlp(ParameterSet& params, const std::string& prefix, int layer, const BertConfig& c)
    : intermediate_(params, prefix + ".intermediate.dense", c.hidden_size, c.intermediate_size),
      output_(params, prefix + ".output.dense", c.intermediate_size, c.hidden_size),
      layer_norm_(params, prefix + ".output.LayerNorm", c.hidden_size, c.layer_norm_eps),
      layer_(layer),
      C_(c.hidden_size),
      I_(c.intermediate_size) {}

Tensor BertMlp::forward(PassState& s, const Tensor& a) {
  const int B = s.B, T = s.T, N = s.N(), C = C_, I = I_;
  const auto act = core::tags().activation;
  // The bias of the first projection is added inside the GELU kernel (one pass fewer), so
  // pre_gelu holds a W_1^T without b_1.
  auto pre_gelu = Tensor::empty(s.ctx, {B, T, I}, DType::f32, act);  // [B, T, I]
  intermediate_.forward(s, pre_gelu.data<float>(), a.data<float>(), N, /*with_bias=*/false);
  auto gelu = Tensor::empty(s.ctx, {B, T, I}, DType::f32, act);  // [B, T, I]
  if (s.compute()) {
    kernels::bias_gelu_forward(gelu.data<float>(), pre_gelu.data<float>(),
                               intermediate_.bias().value.data<float>(), N, I);
  }
  auto residual = Tensor::empty(s.ctx, {B, T, C}, DType::f32, act);  // [B, T, C]
  output_.forward(s, residual.data<float>(), gelu.data<float>(), N);
  if (s.compute()) {
    float* r = residual.data<float>();
    if (s.hidden_dropout > 0.0f) {
      kernels::dropout_forward(r, r, B, long{T} * C, s.hidden_dropout,
                               s.key(encoder_rng_layer(layer_), kMlpOutput), s.first_sample);
    }
    const float* ap = a.data<float>();
    for (long i = 0; i < long{N} * C; ++i) r[i] += ap[i];
  }
  auto out = layer_norm_.forward(s, residual, N);
  if (s.training) {
    a_ = a;
    pre_gelu_ = std::move(pre_gelu);
    gelu_ = std::move(gelu);
  }
  return out;
}

Tensor BertMlp::backward(PassState& s, const Tensor& dout) {
  const int B = s.B, T = s.T, N = s.N(), C = C_, I = I_;
  const auto tmp = core::tags().temporary;
  // da starts as the residual branch's gradient; the first projection adds to it below.
  auto da = Tensor::zeros(s.ctx, {B, T, C}, DType::f32, tmp);  // [B, T, C]
  layer_norm_.backward(s, da.data<float>(), dout.data<float>(), N);

  auto dproj = Tensor::empty(s.ctx, {B, T, C}, DType::f32, tmp);  // [B, T, C]
  if (s.compute()) {
    if (s.hidden_dropout > 0.0f) {
      kernels::dropout_backward(dproj.data<float>(), da.data<float>(), B, long{T} * C,
                                s.hidden_dropout, s.key(encoder_rng_layer(layer_), kMlpOutput),
                                s.first_sample);
    } else {
      std::memcpy(dproj.data<float>(), da.data<float>(), da.nbytes());
    }
  }
  auto dgelu = Tensor::zeros(s.ctx, {B, T, I}, DType::f32, tmp);  // [B, T, I]
  output_.backward(s, dgelu.data<float>(), dproj.data<float>(), gelu_.data<float>(), N);
  dproj.reset();
  gelu_.reset();

  auto dpre = Tensor::zeros(s.ctx, {B, T, I}, DType::f32, tmp);  // [B, T, I]
  if (s.compute()) {
    kernels::bias_gelu_backward(dpre.data<float>(), intermediate_.bias().grad.data<float>(),
                                dgelu.data<float>(), pre_gelu_.data<float>(),
                                intermediate_.bias().value.data<float>(), N, I);
  }
  dgelu.reset();
  pre_gelu_.reset();

  intermediate_.backward(s, da.data<float>(), dpre.data<float>(), a_.data<float>(), N,
                         /*with_bias=*/false);
  a_.reset();
  return da;
}

void BertMlp::release() {
  layer_norm_.release();
  a_.reset();
  pre_gelu_.reset();
  gelu_.reset();
}

}  // namespace memtrain::models
