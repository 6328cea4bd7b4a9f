#pragma once
// One BERT encoder layer (Devlin et al. 2019; Vaswani et al. 2017, post-LN): attention block
// then feed-forward block, each with a residual connection and LayerNorm.
#include <string>

#include "models/bert_attention.hpp"
#include "models/bert_mlp.hpp"

namespace memtrain::models {

class BertLayer {
 public:
  // Parameters named bert.encoder.layer.<layer>.*
  BertLayer(ParameterSet& params, int layer, const BertConfig& config);

  // x [B, T, C] -> [B, T, C] (tag activation).
  core::Tensor forward(PassState& s, const core::Tensor& x);
  // dout [B, T, C] -> dx [B, T, C]; accumulates this layer's parameter gradients.
  core::Tensor backward(PassState& s, const core::Tensor& dout);
  // Drops what forward kept (after an evaluation pass, or an aborted step).
  void release();

 private:
  BertAttention attention_;
  BertMlp mlp_;
};

}  // namespace memtrain::models
