#include "models/bert_attention.hpp"

#include <algorithm>
#include <cstring>

#include "models/f32_access.hpp"
#include "models/row_parallel.hpp"
#include "models/sequence_parallel.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::models {

using core::DType;
using core::Tensor;

BertAttention::BertAttention(ParameterSet& params, const std::string& prefix, int layer, const BertConfig& c,
                             AttentionCoreKind core, const TensorParallel& tp)
    : query_(params, prefix + ".self.query", c.hidden_size, c.hidden_size, LinearParallel::column, tp),
      key_(params, prefix + ".self.key", c.hidden_size, c.hidden_size, LinearParallel::column, tp),
      value_(params, prefix + ".self.value", c.hidden_size, c.hidden_size, LinearParallel::column, tp),
      output_(params, prefix + ".output", c.hidden_size, c.hidden_size, c.layer_norm_eps, layer, kAttentionOutput, tp),
      core_(layer, c.hidden_size / tp.size(), c.num_attention_heads / tp.size(), core,
            tp.rank() * (c.num_attention_heads / tp.size())),
      tp_(tp),
      C_(c.hidden_size),
      NH_(c.num_attention_heads),
      Cl_(c.hidden_size / tp.size()) {}

Tensor BertAttention::forward(PassState& s, const Tensor& x) {
  const int B = s.B, T = s.T, N = s.N(), C = C_, Cl = Cl_;
  const auto act = core::tags().activation;
  const auto tmp = core::tags().temporary;
  // Under sequence parallelism x, the residual and the LayerNorm hold this rank's tokens only
  // (Tl = T/tp of each sample; Note [Sequence-parallel regions]); the projections see all of them.
  const bool sp = tp_.sp();
  // f: entering the column-parallel Q, K, V is the identity forward (Note [Megatron's f and g]),
  // or with sequence parallelism the all-gather of the shard.
  auto q = Tensor::empty(s.ctx, {B, T, Cl}, s.dtype, act);  // [B, T, C/tp]
  auto k = Tensor::empty(s.ctx, {B, T, Cl}, s.dtype, act);  // [B, T, C/tp]
  auto v = Tensor::empty(s.ctx, {B, T, Cl}, s.dtype, act);  // [B, T, C/tp]
  const auto x_f = read_f32(s.ctx, x);                      // [B, Tl, C]
  Tensor context;                                           // [B, T, C/tp]
  F32View context_f;                                        // [B, T, C/tp], rounded in place
  {
    auto q_f = write_f32(s.ctx, q);  // [B, T, C/tp]
    auto k_f = write_f32(s.ctx, k);  // [B, T, C/tp]
    auto v_f = write_f32(s.ctx, v);  // [B, T, C/tp]
    {
      Tensor gathered = sp ? Tensor::empty(s.ctx, {B, T, C}, s.dtype, tmp) : Tensor();  // [B, T, C]
      F32View g_f = sp ? write_f32(s.ctx, gathered) : F32View();
      if (sp) gather_sequence(s, tp_, x_f.get(), g_f.get(), C);
      // Without sp the input is x itself, which bf16 GEMMs read as stored.
      const GemmInput inp = sp ? GemmInput(g_f.get()) : GemmInput(x_f.get(), x);  // [B, T, C]
      query_.forward(s, q_f.get(), inp, N);
      key_.forward(s, k_f.get(), inp, N);
      value_.forward(s, v_f.get(), inp, N);
    }
    // The core reads the projections' floats as stored, without converting q, k, v back in
    // (Note [Views rounded in place]).
    q_f.round_in_place();
    k_f.round_in_place();
    v_f.round_in_place();
    context = core_.forward(s, q_f.get(), k_f.get(), v_f.get(), context_f);
  }

  // BertSelfOutput: out = LayerNorm(x + dropout(context W_o^T + b_o)); g (Note [Megatron's f
  // and g]) inside. The context's view goes with it, to be dropped once the projection has read it.
  Tensor out = output_.forward(s, context, std::move(context_f), x_f.get());  // [B, Tl, C]
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
  const int B = s.B, T = s.T, N = s.N(), C = C_, Cl = Cl_;
  const auto tmp = core::tags().temporary;
  const bool sp = tp_.sp();
  // dx starts as the residual branch's gradient d(residual); the projections add to it below.
  auto [dx, dx_f] = output_.backward_residual(s, da);              // [B, Tl, C]
  auto dcontext = Tensor::empty(s.ctx, {B, T, Cl}, s.dtype, tmp);  // [B, T, C/tp]
  auto dcontext_f = zeroed_f32(s.ctx, dcontext);                   // [B, T, C/tp]
  // g's backward: dcontext = d(projection) W_o, after dropout's backward.
  output_.backward_input(s, dx_f.get(), context_, dcontext, &dcontext_f);
  // The core reads dcontext's floats as stored (Note [Views rounded in place]).
  dcontext_f.round_in_place();
  // Only the flash core's backward reads its own output again.
  if (core_.kind() != AttentionCoreKind::flash) context_.reset();

  // The core's gradients start at zero in float (Note [Zeroed views]) and, rounded in place,
  // are the projections' output gradients below (Note [Views rounded in place]). After the
  // rounding the views no longer touch dq, dk, dv; each view is dropped with its tensor.
  auto dq = Tensor::empty(s.ctx, {B, T, Cl}, s.dtype, tmp);  // [B, T, C/tp]
  auto dk = Tensor::empty(s.ctx, {B, T, Cl}, s.dtype, tmp);  // [B, T, C/tp]
  auto dv = Tensor::empty(s.ctx, {B, T, Cl}, s.dtype, tmp);  // [B, T, C/tp]
  auto dq_f = zeroed_f32(s.ctx, dq);                         // [B, T, C/tp]
  auto dk_f = zeroed_f32(s.ctx, dk);                         // [B, T, C/tp]
  auto dv_f = zeroed_f32(s.ctx, dv);                         // [B, T, C/tp]
  core_.backward(s, dq_f.get(), dk_f.get(), dv_f.get(), dcontext_f.get(), q_, k_, v_, context_);
  dq_f.round_in_place();
  dk_f.round_in_place();
  dv_f.round_in_place();
  dcontext_f = F32View();  // its workspace slot back
  dcontext.reset();
  context_.reset();
  q_.reset();
  k_.reset();
  v_.reset();

  if (!sp) {
    // The residual branch's gradient is counted on tp rank 0 only: f's all-reduce below then
    // adds it once to the shards' input gradients (Note [Megatron's f and g]).
    if (s.compute() && tp_.rank() != 0) std::fill(dx_f.get(), dx_f.get() + long{N} * C, 0.0f);
    // bf16 GEMMs read x and dq, dk, dv as stored; the fp32 path reads dq, dk, dv's rounded
    // floats and one view of a 16-bit x for the three (none for bf16 GEMMs, which take x_'s
    // bits whatever the view).
    const auto x_f = s.native_bf16_gemm ? F32View() : F32View(s.ctx, x_, F32Access::read);  // [B, T, C]
    const GemmInput x_in(x_f.get(), x_);
    query_.backward(s, dx_f.get(), GemmInput(dq_f.get(), dq), x_in, N);
    dq_f = F32View();  // its workspace slot back
    dq.reset();
    key_.backward(s, dx_f.get(), GemmInput(dk_f.get(), dk), x_in, N);
    dk_f = F32View();  // its workspace slot back
    dk.reset();
    value_.backward(s, dx_f.get(), GemmInput(dv_f.get(), dv), x_in, N);
    dv_f = F32View();  // its workspace slot back
    dv.reset();
    if (s.compute()) tp_.all_reduce(dx_f.get(), long{N} * C);  // f
  } else {
    // The input is gathered again rather than kept (Note [Sequence-parallel regions]); the
    // shards' input gradients are reduce-scattered onto this rank's tokens (f's backward).
    auto x_all = Tensor::empty(s.ctx, {B, T, C}, s.dtype, tmp);   // [B, T, C]
    auto dx_all = Tensor::zeros(s.ctx, {B, T, C}, s.dtype, tmp);  // [B, T, C]
    {
      auto x_all_f = write_f32(s.ctx, x_all);
      auto dx_all_f = update_f32(s.ctx, dx_all);
      gather_sequence(s, tp_, read_f32(s.ctx, x_).get(), x_all_f.get(), C);
      query_.backward(s, dx_all_f.get(), GemmInput(dq_f.get(), dq), x_all_f.get(), N);
      key_.backward(s, dx_all_f.get(), GemmInput(dk_f.get(), dk), x_all_f.get(), N);
      value_.backward(s, dx_all_f.get(), GemmInput(dv_f.get(), dv), x_all_f.get(), N);
      add_reduce_scattered(s, tp_, dx_all_f.get(), dx_f.get(), C);  // f
    }
    dq_f = F32View();
    dk_f = F32View();
    dv_f = F32View();
    dq.reset();
    dk.reset();
    dv.reset();
  }
  x_.reset();
  dx_f.commit();
  return dx;
}

void BertAttention::release() {
  output_.release();
  x_.reset();
  q_.reset();
  k_.reset();
  v_.reset();
  core_.release();
  context_.reset();
}

}  // namespace memtrain::models
