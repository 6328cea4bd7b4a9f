#include "models/bert_attention.hpp"

#include <cstring>

#include "kernels/cpu/dropout.hpp"
#include "models/f32_access.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::models {

using core::DType;
using core::Tensor;

BertAttention::BertAttention(ParameterSet& params, const std::string& prefix, int layer,
                             const BertConfig& c, AttentionCoreKind core)
    : query_(params, prefix + ".self.query", c.hidden_size, c.hidden_size),
      key_(params, prefix + ".self.key", c.hidden_size, c.hidden_size),
      value_(params, prefix + ".self.value", c.hidden_size, c.hidden_size),
      output_(params, prefix + ".output.dense", c.hidden_size, c.hidden_size),
      layer_norm_(params, prefix + ".output.LayerNorm", c.hidden_size, c.layer_norm_eps),
      core_(layer, c.hidden_size, c.num_attention_heads, core),
      layer_(layer),
      C_(c.hidden_size),
      NH_(c.num_attention_heads) {}

Tensor BertAttention::forward(PassState& s, const Tensor& x) {
  const int B = s.B, T = s.T, N = s.N(), C = C_;
  const auto act = core::tags().activation;
  auto q = Tensor::empty(s.ctx, {B, T, C}, s.dtype, act);  // [B, T, C]
  auto k = Tensor::empty(s.ctx, {B, T, C}, s.dtype, act);  // [B, T, C]
  auto v = Tensor::empty(s.ctx, {B, T, C}, s.dtype, act);  // [B, T, C]
  const auto x_f = read_f32(s.ctx, x);                      // [B, T, C]
  query_.forward(s, write_f32(s.ctx, q).get(), x_f.get(), N);
  key_.forward(s, write_f32(s.ctx, k).get(), x_f.get(), N);
  value_.forward(s, write_f32(s.ctx, v).get(), x_f.get(), N);

  auto context = core_.forward(s, q, k, v);  // [B, T, C]

  // The residual sum is the LayerNorm's input, which it keeps for its backward pass.
  auto residual = Tensor::empty(s.ctx, {B, T, C}, s.dtype, act);  // [B, T, C]
  {
    // Projection, dropout and residual add in one float view, rounded once (as a fused kernel).
    auto r_f = write_f32(s.ctx, residual);  // [B, T, C]
    output_.forward(s, r_f.get(), read_f32(s.ctx, context).get(), N);
    if (s.compute()) {
      float* r = r_f.get();
      if (s.hidden_dropout > 0.0f) {
        kernels::dropout_forward(r, r, B, long{T} * C, s.hidden_dropout,
                                 s.key(encoder_rng_layer(layer_), kAttentionOutput),
                                 s.first_sample);
      }
      const float* xp = x_f.get();
      for (long i = 0; i < long{N} * C; ++i) r[i] += xp[i];
    }
  }
  auto out = layer_norm_.forward(s, residual, N);
  if (s.training) {
    x_ = x;
    q_ = std::move(q);
    k_ = std::move(k);
    v_ = std::move(v);
    context_ = std::move(context);
  }
  return out;
}

Tensor BertAttention::backward(PassState& s, const Tensor& da) {
  const int B = s.B, T = s.T, N = s.N(), C = C_;
  const auto tmp = core::tags().temporary;
  // dx starts as the residual branch's gradient d(residual); the projections add to it below.
  auto dx = Tensor::zeros(s.ctx, {B, T, C}, s.dtype, tmp);  // [B, T, C]
  auto dx_f = update_f32(s.ctx, dx);                               // [B, T, C]
  layer_norm_.backward(s, dx_f.get(), read_f32(s.ctx, da).get(), N);

  auto dproj = Tensor::empty(s.ctx, {B, T, C}, s.dtype, tmp);     // [B, T, C]
  auto dcontext = Tensor::zeros(s.ctx, {B, T, C}, s.dtype, tmp);  // [B, T, C]
  {
    auto dproj_f = write_f32(s.ctx, dproj);  // [B, T, C]
    if (s.compute()) {
      if (s.hidden_dropout > 0.0f) {
        kernels::dropout_backward(dproj_f.get(), dx_f.get(), B, long{T} * C, s.hidden_dropout,
                                  s.key(encoder_rng_layer(layer_), kAttentionOutput),
                                  s.first_sample);
      } else {
        std::memcpy(dproj_f.get(), dx_f.get(), sizeof(float) * N * C);
      }
    }
    output_.backward(s, update_f32(s.ctx, dcontext).get(), dproj_f.get(),
                     read_f32(s.ctx, context_).get(), N);
  }
  dproj.reset();
  // Only the flash core's backward reads its own output again.
  if (core_.kind() != AttentionCoreKind::flash) context_.reset();

  auto dq = Tensor::zeros(s.ctx, {B, T, C}, s.dtype, tmp);  // [B, T, C]
  auto dk = Tensor::zeros(s.ctx, {B, T, C}, s.dtype, tmp);  // [B, T, C]
  auto dv = Tensor::zeros(s.ctx, {B, T, C}, s.dtype, tmp);  // [B, T, C]
  core_.backward(s, dq, dk, dv, dcontext, q_, k_, v_, context_);
  dcontext.reset();
  context_.reset();
  q_.reset();
  k_.reset();
  v_.reset();

  {
    const auto x_f = read_f32(s.ctx, x_);  // [B, T, C]
    query_.backward(s, dx_f.get(), read_f32(s.ctx, dq).get(), x_f.get(), N);
    dq.reset();
    key_.backward(s, dx_f.get(), read_f32(s.ctx, dk).get(), x_f.get(), N);
    dk.reset();
    value_.backward(s, dx_f.get(), read_f32(s.ctx, dv).get(), x_f.get(), N);
    dv.reset();
  }
  x_.reset();
  dx_f.commit();
  return dx;
}

void BertAttention::release() {
  layer_norm_.release();
  x_.reset();
  q_.reset();
  k_.reset();
  v_.reset();
  core_.release();
  context_.reset();
}

}  // namespace memtrain::models
