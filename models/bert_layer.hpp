#pragma once
// One BERT encoder layer (Devlin et al. 2019; Vaswani et al. 2017, post-LN): attention block
// then feed-forward block, each with a residual connection and LayerNorm.
#include <string>

#include "models/bert_attention.hpp"
#include "models/bert_mlp.hpp"
#include "models/model_options.hpp"

namespace memtrain::models {

class BertLayer {
 public:
  // Parameters named bert.encoder.layer.<layer>.*. options decide whether this layer is
  // checkpointed (recomputes_layer(options, layer, config.num_hidden_layers) under
  // Recompute::full) and which attention core it runs (attention_core_kind). tp: the
  // tensor-parallel group its attention and MLP split over (none by default). A checkpointed
  // layer reruns its collectives with its forward pass in backward.
  BertLayer(ParameterSet& params, int layer, const BertConfig& config, const ModelOptions& options = {},
            const TensorParallel& tp = {});

  // x [B, T, C] -> [B, T, C] (tag activation). When training keeps what backward needs: every
  // sublayer's saved tensors, or only x when checkpointed (Note [Full recompute]).
  core::Tensor forward(PassState& s, const core::Tensor& x);
  // dout [B, T, C] -> dx [B, T, C]; accumulates this layer's parameter gradients. A
  // checkpointed layer first reruns its forward pass from the kept input.
  core::Tensor backward(PassState& s, const core::Tensor& dout);
  // Drops what forward kept (after an evaluation pass, or an aborted step).
  void release();

  bool checkpointed() const { return checkpointed_; }
  // Between steps (nothing kept): whether this layer is checkpointed and which attention core
  // it runs under `options`, as the constructor decides them. Throws memtrain::RuntimeError
  // while forward's tensors are kept.
  void set_recompute(const ModelOptions& options, int num_layers);

 private:
  BertAttention attention_;
  BertMlp mlp_;
  int layer_;
  bool checkpointed_;
  core::Tensor x_;  // the layer input, kept by a checkpointed layer only
};

}  // namespace memtrain::models
