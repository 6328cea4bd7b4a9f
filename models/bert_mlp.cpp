#include "models/bert_mlp.hpp"
#include "models/op_descriptions.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/ops/copy.hpp"
#include "kernels/ops/dropout.hpp"
#include "models/bias_gelu.hpp"
#include "models/f32_access.hpp"
#include "models/row_parallel.hpp"
#include "models/sequence_parallel.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::models {

using core::DType;
using core::Tensor;

BertMlp::BertMlp(ParameterSet& params, const std::string& prefix, int layer, const BertConfig& c,
                 const TensorParallel& tp)
    : intermediate_(params, prefix + ".intermediate.dense", c.hidden_size, c.intermediate_size, LinearParallel::column,
                    tp),
      output_(params, prefix + ".output.dense", c.intermediate_size, c.hidden_size, LinearParallel::row, tp),
      layer_norm_(params, prefix + ".output.LayerNorm", c.hidden_size, c.layer_norm_eps),
      tp_(tp),
      layer_(layer),
      C_(c.hidden_size),
      I_(c.intermediate_size / tp.size()) {}

Tensor BertMlp::forward(PassState& s, const Tensor& a) {
  const int B = s.B, T = s.T, N = s.N(), C = C_, I = I_;
  const auto act = core::tags().activation;
  const auto tmp = core::tags().temporary;
  // Sequence parallelism: a, the residual and the LayerNorm hold this rank's tokens (Nl rows).
  const bool sp = tp_.sp();
  const int Tl = sp ? sequence_shard_length(tp_, T) : T, Nl = B * Tl;
  const std::uint64_t first_element = std::uint64_t(sp ? sequence_shard_first(tp_, T) : 0) * C;
  // The bias of the first projection is added inside the GELU kernel (one pass fewer), so
  // pre_gelu holds a W_1^T without b_1.
  auto pre_gelu = Tensor::empty(s.ctx, {B, T, I}, s.dtype, act);  // [B, T, I/tp]
  const auto a_f = read_f32(s.ctx, a);                            // [B, Tl, C]
  {
    // f: the identity, or the all-gather of the shard (not kept: gathered again in backward).
    Tensor gathered = sp ? Tensor::empty(s.ctx, {B, T, C}, s.dtype, tmp) : Tensor();  // [B, T, C]
    F32View g_f = sp ? write_f32(s.ctx, gathered) : F32View();
    if (sp) gather_sequence(s, tp_, a_f.get(), g_f.get(), C);
    intermediate_.forward(s, write_f32(s.ctx, pre_gelu).get(), sp ? GemmInput(g_f.get()) : GemmInput(a_f.get(), a), N,
                          /*with_bias=*/false);
  }
  auto gelu = Tensor::empty(s.ctx, {B, T, I}, s.dtype, act);  // [B, T, I/tp]
  if (s.compute()) {
    const core::ScopedOp op(s.ctx.op_profile(), "bias_gelu.forward", [&] { return elementwise_description(N, I, 2); });
    bias_gelu_forward(s, gelu, pre_gelu, intermediate_.bias(), N, I);
  }
  auto residual = Tensor::empty(s.ctx, {B, Tl, C}, s.dtype, act);  // [B, Tl, C]
  Tensor out;                                                      // [B, Tl, C]
  {
    // Projection, dropout and residual add in one float view, rounded once (as a fused kernel).
    // g: the row-parallel projection's partial sums, all-reduced (or reduce-scattered onto the
    // shard), then the bias once.
    auto r_f = write_f32(s.ctx, residual);                   // [B, Tl, C]
    row_parallel_forward(s, tp_, output_, gelu, r_f.get());  // g
    if (s.compute()) {
      const core::ScopedOp op(s.ctx.op_profile(), "dropout_residual.forward",
                              [&] { return elementwise_description(Nl, C, 3); });
      kernels::ops::dropout_residual_forward(s.kc(), r_f.get(), r_f.get(), a_f.get(), B, long{Tl} * C, s.hidden_dropout,
                                             s.key(encoder_rng_layer(layer_), kMlpOutput), s.first_sample,
                                             first_element);
    }
    // The LayerNorm reads the residual's floats as stored (Note [Views rounded in place]).
    r_f.round_in_place();
    out = layer_norm_.forward(s, residual, Nl, r_f.get());
  }
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
  const bool sp = tp_.sp();
  const int Tl = sp ? sequence_shard_length(tp_, T) : T, Nl = B * Tl;
  const std::uint64_t first_element = std::uint64_t(sp ? sequence_shard_first(tp_, T) : 0) * C;
  // da starts as the residual branch's gradient; the first projection adds to it below.
  auto da = Tensor::empty(s.ctx, {B, Tl, C}, s.dtype, tmp);  // [B, Tl, C]
  auto da_f = zeroed_f32(s.ctx, da);                         // [B, Tl, C]
  layer_norm_.backward(s, da_f.get(), read_f32(s.ctx, dout).get(), Nl);

  auto dproj = Tensor::empty(s.ctx, {B, Tl, C}, s.dtype, tmp);  // [B, Tl, C]
  auto dgelu = Tensor::empty(s.ctx, {B, T, I}, s.dtype, tmp);   // [B, T, I/tp]
  {
    // Scratch: dproj is freed below unread in 16 bits, so its floats are never rounded back.
    auto dproj_f = scratch_f32(s.ctx, dproj);  // [B, Tl, C]
    if (s.compute()) {
      if (s.hidden_dropout > 0.0f) {
        const core::ScopedOp op(s.ctx.op_profile(), "dropout.backward",
                                [&] { return elementwise_description(Nl, C, 2); });
        kernels::ops::dropout_backward(s.kc(), dproj_f.get(), da_f.get(), B, long{Tl} * C, s.hidden_dropout,
                                       s.key(encoder_rng_layer(layer_), kMlpOutput), s.first_sample, first_element);
      } else {
        kernels::ops::copy_on_device(s.kc(), dproj_f.get(), da_f.get(), sizeof(float) * Nl * C);
      }
    }
    // g's backward: the identity, or the all-gather of the shard's gradient.
    row_parallel_backward(s, tp_, output_, zeroed_f32(s.ctx, dgelu).get(), dproj_f.get(), gelu_);
  }
  dproj.reset();
  gelu_.reset();

  auto dpre = Tensor::empty(s.ctx, {B, T, I}, s.dtype, tmp);  // [B, T, I/tp]
  if (s.compute()) {
    const core::ScopedOp op(s.ctx.op_profile(), "bias_gelu.backward", [&] { return elementwise_description(N, I, 3); });
    bias_gelu_backward(s, dpre, intermediate_.bias(), dgelu, pre_gelu_, N, I);
  }
  dgelu.reset();
  pre_gelu_.reset();

  if (!sp) {
    // The residual gradient counts on tp rank 0 only before f's all-reduce (Note [Megatron's f
    // and g]).
    if (s.compute() && tp_.rank() != 0) std::fill(da_f.get(), da_f.get() + long{N} * C, 0.0f);
    intermediate_.backward(s, da_f.get(), dpre, a_, N, /*with_bias=*/false);
    if (s.compute()) tp_.all_reduce(da_f.get(), long{N} * C);  // f
  } else {
    auto a_all = Tensor::empty(s.ctx, {B, T, C}, s.dtype, tmp);   // [B, T, C]
    auto da_all = Tensor::zeros(s.ctx, {B, T, C}, s.dtype, tmp);  // [B, T, C]
    {
      auto a_all_f = write_f32(s.ctx, a_all);
      auto da_all_f = update_f32(s.ctx, da_all);
      gather_sequence(s, tp_, read_f32(s.ctx, a_).get(), a_all_f.get(), C);
      intermediate_.backward(s, da_all_f.get(), dpre, a_all_f.get(), N, /*with_bias=*/false);
      add_reduce_scattered(s, tp_, da_all_f.get(), da_f.get(), C);  // f
    }
  }
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
