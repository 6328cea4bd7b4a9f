#include "models/bert_attention.hpp"

#include <cstring>

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/dropout.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::models {

using core::DType;
using core::Tensor;

BertAttention::BertAttention(ParameterSet& params, const std::string& prefix, int layer,
                             const BertConfig& c)
    : query_(params, prefix + ".self.query", c.hidden_size, c.hidden_size),
      key_(params, prefix + ".self.key", c.hidden_size, c.hidden_size),
      value_(params, prefix + ".self.value", c.hidden_size, c.hidden_size),
      output_(params, prefix + ".output.dense", c.hidden_size, c.hidden_size),
      layer_norm_(params, prefix + ".output.LayerNorm", c.hidden_size, c.layer_norm_eps),
      layer_(layer),
      C_(c.hidden_size),
      NH_(c.num_attention_heads) {}

Tensor BertAttention::forward(PassState& s, const Tensor& x) {
  const int B = s.B, T = s.T, N = s.N(), C = C_;
  const auto act = core::tags().activation;
  auto q = Tensor::empty(s.ctx, {B, T, C}, DType::f32, act);  // [B, T, C]
  auto k = Tensor::empty(s.ctx, {B, T, C}, DType::f32, act);  // [B, T, C]
  auto v = Tensor::empty(s.ctx, {B, T, C}, DType::f32, act);  // [B, T, C]
  query_.forward(s, q.data<float>(), x.data<float>(), N);
  key_.forward(s, k.data<float>(), x.data<float>(), N);
  value_.forward(s, v.data<float>(), x.data<float>(), N);

  auto probs = Tensor::empty(s.ctx, {B, NH_, T, T}, DType::f32, act);  // [B, NH, T, T]
  auto context = Tensor::empty(s.ctx, {B, T, C}, DType::f32, act);     // [B, T, C]
  const auto probs_key = s.key(encoder_rng_layer(layer_), kAttentionProbs);
  if (s.compute()) {
    kernels::attention_forward(context.data<float>(), probs.data<float>(), q.data<float>(),
                               k.data<float>(), v.data<float>(), s.attention_mask, B, T, C, NH_,
                               s.attention_dropout, probs_key, s.first_sample);
  }

  // The residual sum is the LayerNorm's input, which it keeps for its backward pass.
  auto residual = Tensor::empty(s.ctx, {B, T, C}, DType::f32, act);  // [B, T, C]
  output_.forward(s, residual.data<float>(), context.data<float>(), N);
  if (s.compute()) {
    float* r = residual.data<float>();
    if (s.hidden_dropout > 0.0f) {
      kernels::dropout_forward(r, r, B, long{T} * C, s.hidden_dropout,
                               s.key(encoder_rng_layer(layer_), kAttentionOutput), s.first_sample);
    }
    const float* xp = x.data<float>();
    for (long i = 0; i < long{N} * C; ++i) r[i] += xp[i];
  }
  auto out = layer_norm_.forward(s, residual, N);
  if (s.training) {
    x_ = x;
    q_ = std::move(q);
    k_ = std::move(k);
    v_ = std::move(v);
    probs_ = std::move(probs);
    context_ = std::move(context);
  }
  return out;
}

Tensor BertAttention::backward(PassState& s, const Tensor& da) {
  const int B = s.B, T = s.T, N = s.N(), C = C_;
  const auto tmp = core::tags().temporary;
  // dx starts as the residual branch's gradient d(residual); the projections add to it below.
  auto dx = Tensor::zeros(s.ctx, {B, T, C}, DType::f32, tmp);  // [B, T, C]
  layer_norm_.backward(s, dx.data<float>(), da.data<float>(), N);

  auto dproj = Tensor::empty(s.ctx, {B, T, C}, DType::f32, tmp);  // [B, T, C]
  if (s.compute()) {
    if (s.hidden_dropout > 0.0f) {
      kernels::dropout_backward(dproj.data<float>(), dx.data<float>(), B, long{T} * C,
                                s.hidden_dropout,
                                s.key(encoder_rng_layer(layer_), kAttentionOutput), s.first_sample);
    } else {
      std::memcpy(dproj.data<float>(), dx.data<float>(), dx.nbytes());
    }
  }
  auto dcontext = Tensor::zeros(s.ctx, {B, T, C}, DType::f32, tmp);  // [B, T, C]
  output_.backward(s, dcontext.data<float>(), dproj.data<float>(), context_.data<float>(), N);
  dproj.reset();
  context_.reset();

  auto dq = Tensor::zeros(s.ctx, {B, T, C}, DType::f32, tmp);  // [B, T, C]
  auto dk = Tensor::zeros(s.ctx, {B, T, C}, DType::f32, tmp);  // [B, T, C]
  auto dv = Tensor::zeros(s.ctx, {B, T, C}, DType::f32, tmp);  // [B, T, C]
  {
    auto scratch = Tensor::empty(s.ctx, {B, NH_, T, T}, DType::f32, tmp);  // [B, NH, T, T]
    if (s.compute()) {
      kernels::attention_backward(
          dq.data<float>(), dk.data<float>(), dv.data<float>(), scratch.data<float>(),
          dcontext.data<float>(), probs_.data<float>(), q_.data<float>(), k_.data<float>(),
          v_.data<float>(), B, T, C, NH_, s.attention_dropout,
          s.key(encoder_rng_layer(layer_), kAttentionProbs), s.first_sample);
    }
  }
  dcontext.reset();
  probs_.reset();
  q_.reset();
  k_.reset();
  v_.reset();

  query_.backward(s, dx.data<float>(), dq.data<float>(), x_.data<float>(), N);
  dq.reset();
  key_.backward(s, dx.data<float>(), dk.data<float>(), x_.data<float>(), N);
  dk.reset();
  value_.backward(s, dx.data<float>(), dv.data<float>(), x_.data<float>(), N);
  dv.reset();
  x_.reset();
  return dx;
}

void BertAttention::release() {
  layer_norm_.release();
  x_.reset();
  q_.reset();
  k_.reset();
  v_.reset();
  probs_.reset();
  context_.reset();
}

}  // namespace memtrain::models
