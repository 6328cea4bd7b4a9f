#pragma once
// The attention core of a BERT self-attention block: q, k, v -> context = dropout(softmax(
// Q K^T / sqrt(HS) + mask)) V (Vaswani et al. 2017, eq. 1), and its backward. The projections
// around it stay in BertAttention; what differs between the variants below is only what the
// core keeps between forward and backward, which is the part of a layer's activations that
// grows with the square of the sequence length.
#include "models/f32_access.hpp"
#include "models/model_options.hpp"
#include "models/pass_state.hpp"
#include "runtime/core/tensor.hpp"

namespace memtrain::models {

// Note [Three attention cores]
// standard: keeps probs [B, NH, T, T] (the softmax output before dropout) for backward.
// recompute_probs: Megatron-LM's selective recompute (Korthikanti et al. 2022, sec. 4.2) keeps
//   nothing of its own; backward rebuilds probs from the saved q, k into a temporary with the
//   very code the forward pass ran (kernels::attention_probs), and dropout masks are pure
//   functions of their keys (Note [Dropout keys]), so gradients are bitwise those of standard.
//   probs x V itself is not rerun: its output, the context, is kept anyway as the output
//   projection's input, and its backward needs only probs, V and the regenerated mask.
// flash: FlashAttention (Dao et al. 2022) keeps the per-row log-sum-exp [B, NH, T] (f32) and
//   recomputes probabilities per tile in backward; equal to standard within float rounding
//   (the softmax is summed in a different order), in general not bitwise.
// flash wins over selective when both are asked for: it already stores no probabilities.
enum class AttentionCoreKind { standard, recompute_probs, flash };

// Which core encoder layer `layer` of num_layers uses under `options`.
AttentionCoreKind attention_core_kind(const ModelOptions& options, int layer, int num_layers);

class AttentionCore {
 public:
  // layer: encoder layer index (dropout keys); C = hidden_size, NH = num_attention_heads, or
  // under tensor parallelism this rank's share of both (C / tp, NH / tp) with first_head the
  // global index of its first head, so that dropout draws the unsharded layer's masks.
  AttentionCore(int layer, int C, int NH, AttentionCoreKind kind, int first_head = 0);

  // q, k, v [B, T, C]: float views holding exactly the stored q, k, v tensors (the caller's
  // views rounded in place: Note [Views rounded in place]; recompute_probs rebuilds the
  // probabilities from the tensors themselves, bitwise these floats) -> context [B, T, C] (tag
  // activation); padding keys masked by s.attention_mask. context_f receives context's float
  // view rounded in place, for the output projection to read; the caller drops it before the
  // returned tensor. When s.training keeps probs [B, NH, T, T] (standard) or lse [B, NH, T] f32
  // (flash) until backward (tag activation). Throws std::invalid_argument from the kernels for
  // T > 16384 (standard and recompute_probs).
  core::Tensor forward(PassState& s, const float* q, const float* k, const float* v, F32View& context_f);
  // Accumulates (+=) into the float views dq, dk, dv [B, T, C] from the float view dcontext
  // [B, T, C]; q, k, v and context are the tensors forward's inputs were stored in and its
  // output. Releases what forward kept. Temporaries (tag temporary): standard one
  // [B, NH, T, T]; recompute_probs two; flash none (tiles live in the context's workspace).
  void backward(PassState& s, float* dq, float* dk, float* dv, const float* dcontext, const core::Tensor& q,
                const core::Tensor& k, const core::Tensor& v, const core::Tensor& context);
  void release();

  AttentionCoreKind kind() const { return kind_; }
  // Changes what the core keeps for backward, between steps only (nothing kept: after
  // backward or release). Throws memtrain::RuntimeError while forward's tensors are kept.
  void set_kind(AttentionCoreKind kind);

 private:
  int layer_, C_, NH_;
  AttentionCoreKind kind_;
  int first_head_;
  core::Tensor probs_;  // [B, NH, T, T], standard only
  core::Tensor lse_;    // [B, NH, T] f32, flash only
};

}  // namespace memtrain::models
