#include "models/attention_core.hpp"
#include "models/op_descriptions.hpp"

#include "kernels/ops/attention.hpp"
#include "models/f32_access.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::models {

using core::DType;
using core::Tensor;

AttentionCoreKind attention_core_kind(const ModelOptions& options, int layer, int num_layers) {
  if (options.attention == AttentionImpl::flash) return AttentionCoreKind::flash;
  if (options.recompute == Recompute::selective && recomputes_layer(options, layer, num_layers)) {
    return AttentionCoreKind::recompute_probs;
  }
  return AttentionCoreKind::standard;
}

AttentionCore::AttentionCore(int layer, int C, int NH, AttentionCoreKind kind, int first_head)
    : layer_(layer), C_(C), NH_(NH), kind_(kind), first_head_(first_head) {}

void AttentionCore::set_kind(AttentionCoreKind kind) {
  if (probs_.defined() || lse_.defined()) {
    throw RuntimeError("AttentionCore::set_kind: layer " + std::to_string(layer_) +
                       " still keeps a forward pass's tensors; change it between steps");
  }
  kind_ = kind;
}

Tensor AttentionCore::forward(PassState& s, const float* q, const float* k, const float* v, F32View& context_f) {
  const int B = s.B, T = s.T, C = C_, NH = NH_;
  const auto act = core::tags().activation;
  const auto key = s.key(encoder_rng_layer(layer_), kAttentionProbs);
  if (kind_ == AttentionCoreKind::flash) {
    auto lse = Tensor::empty(s.ctx, {B, NH, T}, DType::f32, act);  // [B, NH, T]
    auto context = Tensor::empty(s.ctx, {B, T, C}, s.dtype, act);  // [B, T, C]
    // Declared after context, so that a throwing kernel drops the view before the tensor.
    auto out = write_f32(s.ctx, context);  // [B, T, C]
    if (s.compute()) {
      // Tiles live in the context's workspace, outside the allocator, so a dry run (which
      // takes none) plans the same allocations (Note [Workspace outside the allocator]).
      auto tiles = s.ctx.workspace().lease(kernels::ops::flash_attention_workspace_elements(s.kc(), T, C, NH));
      const core::ScopedOp op(s.ctx.op_profile(), "flash_attention.forward",
                              [&] { return attention_description(B, NH, T, C, 2); });
      kernels::ops::flash_attention_forward(s.kc(), out.get(), lse.data<float>(), q, k, v, s.attention_mask, B, T, C,
                                            NH, s.attention_dropout, key, s.first_sample, tiles.data(), first_head_);
    }
    out.round_in_place();
    context_f = std::move(out);
    if (s.training) lse_ = std::move(lse);
    return context;
  }
  // recompute_probs still needs the probabilities for the product with V, but only for this
  // call: a temporary, so the activation tag shows what is kept between the passes.
  const bool keeps_probs = kind_ == AttentionCoreKind::standard;
  auto probs = Tensor::empty(s.ctx, {B, NH, T, T}, s.dtype,
                             keeps_probs ? act : core::tags().temporary);  // [B, NH, T, T]
  auto context = Tensor::empty(s.ctx, {B, T, C}, s.dtype, act);            // [B, T, C]
  auto out = write_f32(s.ctx, context);                                    // [B, T, C]; after context, as above
  if (s.compute()) {
    const core::ScopedOp op(s.ctx.op_profile(), "attention.forward",
                            [&] { return attention_description(B, NH, T, C, 2); });
    kernels::ops::attention_forward(s.kc(), out.get(), write_f32(s.ctx, probs).get(), q, k, v, s.attention_mask, B, T,
                                    C, NH, s.attention_dropout, key, s.first_sample, first_head_);
  }
  out.round_in_place();
  context_f = std::move(out);
  if (s.training && keeps_probs) probs_ = std::move(probs);
  return context;
}

void AttentionCore::backward(PassState& s, float* dq, float* dk, float* dv, const float* dcontext, const Tensor& q,
                             const Tensor& k, const Tensor& v, const Tensor& context) {
  const int B = s.B, T = s.T, C = C_, NH = NH_;
  const auto tmp = core::tags().temporary;
  const auto key = s.key(encoder_rng_layer(layer_), kAttentionProbs);
  if (kind_ == AttentionCoreKind::flash) {
    if (s.compute()) {
      auto tiles = s.ctx.workspace().lease(kernels::ops::flash_attention_workspace_elements(s.kc(), T, C, NH));
      const core::ScopedOp op(s.ctx.op_profile(), "flash_attention.backward",
                              [&] { return attention_description(B, NH, T, C, 4); });
      kernels::ops::flash_attention_backward(s.kc(), dq, dk, dv, dcontext, read_f32(s.ctx, context).get(),
                                             lse_.data<float>(), read_f32(s.ctx, q).get(), read_f32(s.ctx, k).get(),
                                             read_f32(s.ctx, v).get(), s.attention_mask, B, T, C, NH,
                                             s.attention_dropout, key, s.first_sample, tiles.data(), first_head_);
    }
    lse_.reset();
    return;
  }
  Tensor probs = std::move(probs_);
  if (kind_ == AttentionCoreKind::recompute_probs) {
    // Rebuilt exactly as the forward pass made them, and stored like them (rounded to 16 bits
    // in 16-bit modes), so the backward pass below sees what standard would have kept.
    probs = Tensor::empty(s.ctx, {B, NH, T, T}, s.dtype, tmp);  // [B, NH, T, T]
    if (s.compute()) {
      const core::ScopedOp op(s.ctx.op_profile(), "attention.recompute_probs",
                              [&] { return attention_description(B, NH, T, C, 1); });
      kernels::ops::attention_probs(s.kc(), write_f32(s.ctx, probs).get(), read_f32(s.ctx, q).get(),
                                    read_f32(s.ctx, k).get(), s.attention_mask, B, T, C, NH);
    }
  }
  auto scratch = Tensor::empty(s.ctx, {B, NH, T, T}, s.dtype, tmp);  // [B, NH, T, T]
  if (s.compute()) {
    const core::ScopedOp op(s.ctx.op_profile(), "attention.backward",
                            [&] { return attention_description(B, NH, T, C, 4); });
    kernels::ops::attention_backward(s.kc(), dq, dk, dv, scratch_f32(s.ctx, scratch).get(), dcontext,
                                     read_f32(s.ctx, probs).get(), read_f32(s.ctx, q).get(), read_f32(s.ctx, k).get(),
                                     read_f32(s.ctx, v).get(), B, T, C, NH, s.attention_dropout, key, s.first_sample,
                                     first_head_);
  }
}

void AttentionCore::release() {
  probs_.reset();
  lse_.reset();
}

}  // namespace memtrain::models
