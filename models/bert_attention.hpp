#pragma once
// One post-LN self-attention block of a BERT encoder layer (Hugging Face BertAttention =
// BertSelfAttention + BertSelfOutput): a = LayerNorm(x + dropout(Attention(x W_q, x W_k, x W_v)
// W_o)).
#include <string>

#include "models/attention_core.hpp"
#include "models/bert_config.hpp"
#include "models/linear.hpp"
#include "models/output_sublayer.hpp"
#include "models/pass_state.hpp"
#include "models/tensor_parallel.hpp"

namespace memtrain::models {

class BertAttention {
 public:
  // prefix: "bert.encoder.layer.<l>.attention"; layer: l (for dropout keys); core: what the
  // attention core keeps for backward (Note [Three attention cores]). Under tensor
  // parallelism (tp.size() > 1) Q, K and V are column-parallel, so this rank holds heads
  // [rank x NH / tp, (rank + 1) x NH / tp), and the output projection is row-parallel
  // (Shoeybi et al. 2019, sec. 3, Figure 3b); tp.size() must divide num_attention_heads.
  BertAttention(ParameterSet& params, const std::string& prefix, int layer, const BertConfig& config,
                AttentionCoreKind core = AttentionCoreKind::standard, const TensorParallel& tp = {});

  // x [B, T, C] -> a [B, T, C] (tag activation). When training keeps x, q, k, v [B, T, C / tp],
  // the attention context [B, T, C / tp], what the core keeps (probs or lse, for NH / tp
  // heads) and the LayerNorm input until backward. One all-reduce over the tp group (g).
  core::Tensor forward(PassState& s, const core::Tensor& x);
  // da [B, T, C] -> dx [B, T, C] (tag temporary); accumulates parameter gradients and releases
  // everything forward kept. One all-reduce over the tp group (f).
  core::Tensor backward(PassState& s, const core::Tensor& da);
  void release();
  // Between steps: what the attention core keeps for backward (AttentionCore::set_kind).
  void set_core_kind(AttentionCoreKind kind) { core_.set_kind(kind); }

 private:
  Linear query_, key_, value_;
  OutputSublayer output_;  // BertSelfOutput: output.dense (row-parallel), dropout, residual, output.LayerNorm
  AttentionCore core_;
  TensorParallel tp_;
  int C_, NH_;
  int Cl_;  // C / tp: this rank's columns of q, k, v and the context
  core::Tensor x_, q_, k_, v_, context_;
};

}  // namespace memtrain::models
