#pragma once
// One post-LN self-attention block of a BERT encoder layer (Hugging Face BertAttention =
// BertSelfAttention + BertSelfOutput): a = LayerNorm(x + dropout(Attention(x W_q, x W_k, x W_v)
// W_o)).
#include <string>

#include "models/attention_core.hpp"
#include "models/bert_config.hpp"
#include "models/layer_norm.hpp"
#include "models/linear.hpp"
#include "models/pass_state.hpp"

namespace memtrain::models {

class BertAttention {
 public:
  // prefix: "bert.encoder.layer.<l>.attention"; layer: l (for dropout keys); core: what the
  // attention core keeps for backward (Note [Three attention cores]).
  BertAttention(ParameterSet& params, const std::string& prefix, int layer,
                const BertConfig& config, AttentionCoreKind core = AttentionCoreKind::standard);

  // x [B, T, C] -> a [B, T, C] (tag activation). When training keeps x, q, k, v, the attention
  // context, what the core keeps (probs or lse) and the LayerNorm input until backward.
  core::Tensor forward(PassState& s, const core::Tensor& x);
  // da [B, T, C] -> dx [B, T, C] (tag temporary); accumulates parameter gradients and releases
  // everything forward kept.
  core::Tensor backward(PassState& s, const core::Tensor& da);
  void release();

 private:
  Linear query_, key_, value_, output_;
  LayerNorm layer_norm_;
  AttentionCore core_;
  int layer_, C_, NH_;
  core::Tensor x_, q_, k_, v_, context_;
};

}  // namespace memtrain::models
