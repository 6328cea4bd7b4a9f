#include "models/bert_mlp.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/dropout.hpp"
#include "kernels/cpu/gelu.hpp"
#include "models/f32_access.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::models {

using core::DType;
using core::Tensor;

BertMlp::BertMlp(ParameterSet& params, const std::string& prefix, int layer, const BertConfig& c,
                 const TensorParallel& tp)
    : intermediate_(params, prefix + ".intermediate.dense", c.hidden_size, c.intermediate_size,
                    LinearParallel::column, tp),
      output_(params, prefix + ".output.dense", c.intermediate_size, c.hidden_size,
              LinearParallel::row, tp),
      layer_norm_(params, prefix + ".output.LayerNorm", c.hidden_size, c.layer_norm_eps),
      tp_(tp),
      layer_(layer),
      C_(c.hidden_size),
      I_(c.intermediate_size / tp.size()) {}

Tensor BertMlp::forward(PassState& s, const Tensor& a) {
  const int B = s.B, T = s.T, N = s.N(), C = C_, I = I_;
  const auto act = core::tags().activation;
  // The bias of the first projection is added inside the GELU kernel (one pass fewer), so
  // pre_gelu holds a W_1^T without b_1.
  auto pre_gelu = Tensor::empty(s.ctx, {B, T, I}, s.dtype, act);  // [B, T, I/tp]
  const auto a_f = read_f32(s.ctx, a);                            // [B, T, C]
  intermediate_.forward(s, write_f32(s.ctx, pre_gelu).get(), a_f.get(), N, /*with_bias=*/false);
  auto gelu = Tensor::empty(s.ctx, {B, T, I}, s.dtype, act);  // [B, T, I/tp]
  if (s.compute()) {
    kernels::bias_gelu_forward(write_f32(s.ctx, gelu).get(), read_f32(s.ctx, pre_gelu).get(),
                               read_f32(s.ctx, intermediate_.bias().value).get(), N, I);
  }
  auto residual = Tensor::empty(s.ctx, {B, T, C}, s.dtype, act);  // [B, T, C]
  {
    // Projection, dropout and residual add in one float view, rounded once (as a fused kernel).
    // g: the row-parallel projection's partial sums, all-reduced, then the bias once.
    auto r_f = write_f32(s.ctx, residual);  // [B, T, C]
    output_.forward(s, r_f.get(), read_f32(s.ctx, gelu).get(), N, !tp_.enabled());
    if (s.compute()) {
      float* r = r_f.get();
      if (tp_.enabled()) {
        tp_.all_reduce(r, long{N} * C);  // g
        add_bias(s, r, output_.bias(), N);
      }
      if (s.hidden_dropout > 0.0f) {
        kernels::dropout_forward(r, r, B, long{T} * C, s.hidden_dropout,
                                 s.key(encoder_rng_layer(layer_), kMlpOutput), s.first_sample);
      }
      const float* ap = a_f.get();
      for (long i = 0; i < long{N} * C; ++i) r[i] += ap[i];
    }
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
  auto da = Tensor::zeros(s.ctx, {B, T, C}, s.dtype, tmp);  // [B, T, C]
  auto da_f = update_f32(s.ctx, da);                        // [B, T, C]
  layer_norm_.backward(s, da_f.get(), read_f32(s.ctx, dout).get(), N);

  auto dproj = Tensor::empty(s.ctx, {B, T, C}, s.dtype, tmp);  // [B, T, C]
  auto dgelu = Tensor::zeros(s.ctx, {B, T, I}, s.dtype, tmp);  // [B, T, I/tp]
  {
    auto dproj_f = write_f32(s.ctx, dproj);  // [B, T, C]
    if (s.compute()) {
      if (s.hidden_dropout > 0.0f) {
        kernels::dropout_backward(dproj_f.get(), da_f.get(), B, long{T} * C, s.hidden_dropout,
                                  s.key(encoder_rng_layer(layer_), kMlpOutput), s.first_sample);
      } else {
        std::memcpy(dproj_f.get(), da_f.get(), sizeof(float) * N * C);
      }
    }
    output_.backward(s, update_f32(s.ctx, dgelu).get(), dproj_f.get(), read_f32(s.ctx, gelu_).get(),
                     N);
  }
  dproj.reset();
  gelu_.reset();

  auto dpre = Tensor::zeros(s.ctx, {B, T, I}, s.dtype, tmp);  // [B, T, I/tp]
  if (s.compute()) {
    auto dbias = update_f32(s.ctx, intermediate_.bias().grad);  // [I]
    kernels::bias_gelu_backward(update_f32(s.ctx, dpre).get(), dbias.get(),
                                read_f32(s.ctx, dgelu).get(), read_f32(s.ctx, pre_gelu_).get(),
                                read_f32(s.ctx, intermediate_.bias().value).get(), N, I);
  }
  dgelu.reset();
  pre_gelu_.reset();

  // The residual gradient counts on tp rank 0 only before f's all-reduce (Note [Megatron's f
  // and g]).
  if (s.compute() && tp_.rank() != 0) std::fill(da_f.get(), da_f.get() + long{N} * C, 0.0f);
  intermediate_.backward(s, da_f.get(), read_f32(s.ctx, dpre).get(), read_f32(s.ctx, a_).get(), N,
                         /*with_bias=*/false);
  if (s.compute()) tp_.all_reduce(da_f.get(), long{N} * C);  // f
  a_.reset();
  da_f.commit();
  return da;
}

void BertMlp::release() {
  layer_norm_.release();
  a_.reset();
  pre_gelu_.reset();
  gelu_.reset();
}

}  // namespace memtrain::models
