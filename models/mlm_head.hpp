#pragma once
// The masked-LM head (Hugging Face BertOnlyMLMHead: transform dense -> GELU -> LayerNorm, then
// the decoder, whose weight is the word-embedding table, plus cls.predictions.bias), run on the
// masked positions only, as NVIDIA's BERT does: the loss is the same and the [M, V] logits
// replace [B*T, V] ones.
#include <cstdint>
#include <vector>

#include "models/bert_config.hpp"
#include "models/layer_norm.hpp"
#include "models/linear.hpp"
#include "models/pass_state.hpp"
#include "models/step_stats.hpp"

namespace memtrain::models {

class MlmHead {
 public:
  // `word_embeddings` is the tied decoder weight [V, C] (its grad receives the decoder's).
  MlmHead(ParameterSet& params, const BertConfig& config, const Parameter& word_embeddings);

  // Logits [M, V] (tag activation) at flat positions (b * T + t) of hidden [B*T, C]. Keeps the
  // head's intermediates when s.training.
  core::Tensor logits(PassState& s, const core::Tensor& hidden,
                      const std::vector<std::int32_t>& positions);

  // Softmax cross-entropy at the masked positions and the head's backward pass. The loss
  // gradient is scaled by grad_scale. Returns d hidden [B*T, C] (tag temporary; zero at rows
  // that are not masked) and adds to *stats.
  core::Tensor loss_backward(PassState& s, const core::Tensor& hidden,
                             const std::vector<std::int32_t>& positions,
                             const std::vector<std::int32_t>& labels, float grad_scale,
                             StepStats* stats);
  // loss_backward in two halves, so that the model can time forward and backward apart:
  // loss runs logits + the softmax cross-entropy (adds to *stats) and returns d logits [M, V]
  // (tag activation, scaled by grad_scale); backward consumes them and returns d hidden
  // [B*T, C] as loss_backward does.
  core::Tensor loss(PassState& s, const core::Tensor& hidden,
                    const std::vector<std::int32_t>& positions,
                    const std::vector<std::int32_t>& labels, float grad_scale, StepStats* stats);
  core::Tensor backward(PassState& s, core::Tensor dlogits,
                        const std::vector<std::int32_t>& positions);
  void release();

 private:
  Linear dense_;
  LayerNorm layer_norm_;
  Parameter bias_;
  Parameter word_;
  int C_, V_;
  core::Tensor gathered_, pre_gelu_, transformed_;
};

}  // namespace memtrain::models
