#pragma once
// The feed-forward half of a BERT encoder layer (Hugging Face BertIntermediate + BertOutput):
// out = LayerNorm(a + dropout(GELU(a W_1 + b_1) W_2 + b_2)), post-LN.
#include <string>

#include "models/bert_config.hpp"
#include "models/linear.hpp"
#include "models/output_sublayer.hpp"
#include "models/pass_state.hpp"

namespace memtrain::models {

class BertMlp {
 public:
  // prefix: "bert.encoder.layer.<l>"; names <prefix>.intermediate.dense, <prefix>.output.dense,
  // <prefix>.output.LayerNorm. Under tensor parallelism (tp.size() > 1, dividing
  // intermediate_size) the first projection is column-parallel and the second row-parallel
  // (Shoeybi et al. 2019, sec. 3, Figure 3a): each rank holds I / tp intermediate features.
  BertMlp(ParameterSet& params, const std::string& prefix, int layer, const BertConfig& config,
          const TensorParallel& tp = {});

  // a [B, T, C] -> out [B, T, C] (tag activation). When training keeps a, the pre-activation
  // [B, T, I/tp] and the GELU output [B, T, I/tp] until backward. One all-reduce over the tp
  // group (g).
  core::Tensor forward(PassState& s, const core::Tensor& a);
  // dout [B, T, C] -> da [B, T, C] (tag temporary); accumulates parameter gradients and
  // releases everything forward kept. One all-reduce over the tp group (f).
  core::Tensor backward(PassState& s, const core::Tensor& dout);
  void release();

 private:
  Linear intermediate_;
  OutputSublayer output_;  // BertOutput: output.dense (row-parallel), dropout, residual, output.LayerNorm
  TensorParallel tp_;
  int C_, I_;  // I_: this rank's intermediate features (I / tp)
  core::Tensor a_, pre_gelu_, gelu_;
};

}  // namespace memtrain::models
