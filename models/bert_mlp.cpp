#include "models/bert_mlp.hpp"
#include "models/op_descriptions.hpp"

#include <algorithm>
#include <cstring>

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
      output_(params, prefix + ".output", c.intermediate_size, c.hidden_size, c.layer_norm_eps, layer, kMlpOutput, tp),
      tp_(tp),
      C_(c.hidden_size),
      I_(c.intermediate_size / tp.size()) {}

Tensor BertMlp::forward(PassState& s, const Tensor& a) {
  const int B = s.B, T = s.T, N = s.N(), C = C_, I = I_;
  const auto act = core::tags().activation;
  const auto tmp = core::tags().temporary;
  // Sequence parallelism: a, the residual and the LayerNorm hold this rank's tokens (Tl = T/tp
  // of each sample).
  const bool sp = tp_.sp();
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
  // BertOutput: out = LayerNorm(a + dropout(gelu W_2^T + b_2)); g (Note [Megatron's f and g])
  // inside. bf16 GEMMs read gelu as stored; the fp32 path takes a read view of it.
  Tensor out = output_.forward(s, gelu, F32View(), a_f.get());  // [B, Tl, C]
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
  // da starts as the residual branch's gradient; the first projection adds to it below.
  auto [da, da_f] = output_.backward_residual(s, dout);        // [B, Tl, C]
  auto dgelu = Tensor::empty(s.ctx, {B, T, I}, s.dtype, tmp);  // [B, T, I/tp]
  // g's backward: dgelu = d(projection) W_2, after dropout's backward.
  output_.backward_input(s, da_f.get(), gelu_, dgelu);
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
  output_.release();
  a_.reset();
  pre_gelu_.reset();
  gelu_.reset();
}

}  // namespace memtrain::models
