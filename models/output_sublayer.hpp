#pragma once
// The output sublayer that closes both halves of a BERT encoder layer (Hugging Face
// BertSelfOutput after the attention, BertOutput after the feed-forward network), post-LN
// (Vaswani et al. 2017, sec. 3.1: LayerNorm(x + Sublayer(x)), with dropout on the sublayer's
// output as in sec. 5.4):
//   out = LayerNorm(x + dropout(input W^T + b)),
// where input [B, T, K] is the attention context (K = C) or the GELU output (K = I), and x
// [B, T, C] the input of the half it closes. Under tensor parallelism the projection is
// row-parallel (Shoeybi et al. 2019, sec. 3: each rank holds K / tp input columns of W and the
// whole bias; Megatron's g follows it: Note [Megatron's f and g]).
#include <string>

#include "models/f32_access.hpp"
#include "models/layer_norm.hpp"
#include "models/linear.hpp"
#include "models/pass_state.hpp"
#include "models/tensor_parallel.hpp"

namespace memtrain::models {

class OutputSublayer {
 public:
  // prefix: "<...>.output"; names <prefix>.dense.weight [C, K/tp], <prefix>.dense.bias [C] and
  // <prefix>.LayerNorm.{weight,bias} [C], in that order. in_features: K, unsharded; layer and
  // site: the dropout's key (Note [Dropout keys]). tp.size() must divide in_features.
  OutputSublayer(ParameterSet& params, const std::string& prefix, int in_features, int hidden_size,
                 float layer_norm_eps, int layer, DropoutSite site, const TensorParallel& tp = {});

  // input [B, T, K/tp] and x [B, Tl, C] -> out [B, Tl, C] (tag activation); Tl = T/tp under
  // sequence parallelism (this rank's tokens, Note [Sequence-parallel regions]), else T.
  // input_f: the caller's float view of input rounded in place (Note [Views rounded in place]),
  // or a null view to read the tensor itself; it is dropped as soon as the projection has read
  // it, returning its workspace slot. x_f: a float view of x. When training the LayerNorm keeps
  // its input, the residual sum [B, Tl, C], until backward; the caller keeps `input`.
  core::Tensor forward(PassState& s, const core::Tensor& input, F32View input_f, const float* x_f);

  // Backward runs in two halves, so that the caller allocates its input's gradient between
  // them, where one fused pass would (the allocation trace is that of the code before the
  // sublayer was shared).
  struct ResidualGradient {
    core::Tensor dx;  // [B, Tl, C] (tag temporary)
    F32View dx_f;     // its zeroed float view: the caller adds its own share and commits
  };
  // dout [B, Tl, C] -> dx = d(LayerNorm input), the residual branch's gradient of x (the
  // caller adds the rest of x's gradient to dx_f). Then allocates d(projection) [B, Tl, C]
  // (tag temporary), held for backward_input.
  ResidualGradient backward_residual(PassState& s, const core::Tensor& dout);
  // dx_f [B, Tl, C]: backward_residual's dx_f (d(residual), not yet added to). dinput
  // [B, T, K/tp] = dropout's backward of it times W, from zero; accumulates dW, db; frees
  // d(projection). input: the forward's input [B, T, K/tp]. dinput_f: the caller's zeroed view
  // of dinput, which it keeps; when null a zeroed view is made here (after the dropout) and
  // rounded into dinput before returning.
  void backward_input(PassState& s, const float* dx_f, const core::Tensor& input, const core::Tensor& dinput,
                      F32View* dinput_f = nullptr);

  // Drops what forward kept and the gradient between the halves of backward.
  void release();

 private:
  Linear dense_;
  LayerNorm layer_norm_;
  TensorParallel tp_;
  int layer_;
  DropoutSite site_;
  int C_;
  core::Tensor dproj_;  // [B, Tl, C]: d(projection output), from backward_residual to backward_input
};

}  // namespace memtrain::models
