#pragma once
// The masked-LM head (Hugging Face BertOnlyMLMHead: transform dense -> GELU -> LayerNorm, then
// the decoder, whose weight is the word-embedding table, plus cls.predictions.bias), run on the
// masked positions only, as NVIDIA's BERT does: the loss is the same and the [M, V] logits
// replace [B*T, V] ones.
#include <cstdint>
#include <vector>

#include "models/bert_config.hpp"
#include "models/f32_access.hpp"
#include "models/layer_norm.hpp"
#include "models/linear.hpp"
#include "models/pass_state.hpp"
#include "models/step_stats.hpp"
#include "models/tensor_parallel.hpp"
#include "models/vocab_parallel_cross_entropy.hpp"

namespace memtrain::models {

class MlmHead {
 public:
  // `word_embeddings` is the tied decoder weight [V, C] (its grad receives the decoder's).
  // Under tensor parallelism the decoder is vocabulary-parallel: `word_embeddings` is this
  // rank's shard of rows [Vp / tp, C], the bias cls.predictions.bias is sharded alike, and the
  // loss is vocab_parallel_cross_entropy; the transform (dense, GELU, LayerNorm) is replicated.
  MlmHead(ParameterSet& params, const BertConfig& config, const Parameter& word_embeddings,
          const TensorParallel& tp = {});

  // Logits [M, V] (tag activation; this rank's [M, Vp / tp] columns under tensor parallelism)
  // at flat positions (b * T + t) of hidden [B*T, C]. Keeps the head's intermediates when
  // s.training. logits_f, when given, receives their float view rounded in place and still
  // writable (Note [Views rounded in place]): the loss writes their gradient over it.
  core::Tensor logits(PassState& s, const core::Tensor& hidden, const std::vector<std::int32_t>& positions,
                      F32View* logits_f = nullptr);

  // Softmax cross-entropy at the masked positions and the head's backward pass. The loss
  // gradient is scaled by grad_scale. Returns d hidden [B*T, C] (tag temporary; zero at rows
  // that are not masked) and adds to *stats.
  core::Tensor loss_backward(PassState& s, const core::Tensor& hidden, const std::vector<std::int32_t>& positions,
                             const std::vector<std::int32_t>& labels, float grad_scale, StepStats* stats);
  // loss_backward in two halves, so that the model can time forward and backward apart:
  // loss runs logits + the softmax cross-entropy (adds to *stats) and returns d logits [M, V]
  // (tag activation, scaled by grad_scale); backward consumes them and returns d hidden
  // [B*T, C] as loss_backward does. backward must be given the tensor loss returned: loss also
  // keeps its floats (a workspace slot of M x V floats: Note [Views rounded in place]), which
  // backward's GEMMs read, until backward or release().
  core::Tensor loss(PassState& s, const core::Tensor& hidden, const std::vector<std::int32_t>& positions,
                    const std::vector<std::int32_t>& labels, float grad_scale, StepStats* stats);
  core::Tensor backward(PassState& s, core::Tensor dlogits, const std::vector<std::int32_t>& positions);
  // The summed cross-entropy and the correct rows of logits as `logits` returned them, without
  // gradients (evaluation). Adds to *stats.
  void evaluate(PassState& s, const core::Tensor& logits, const std::vector<std::int32_t>& labels,
                StepStats* stats) const;
  // log-softmax over the whole vocabulary of logits [P, V] (or this rank's columns): [P, V]
  // row-major on every rank, gathered over the tensor-parallel group (padding dropped).
  std::vector<float> log_probs(PassState& s, const core::Tensor& logits) const;
  void release();

 private:
  Linear dense_;
  LayerNorm layer_norm_;
  Parameter bias_;
  Parameter word_;
  TensorParallel tp_;
  int C_, V_;
  VocabShard shard_;  // this rank's columns of the logits (all V of them without tp)
  core::Tensor gathered_, pre_gelu_, transformed_;
  F32View dlogits_f_;  // loss's d logits, rounded in place, for backward's GEMMs
};

}  // namespace memtrain::models
