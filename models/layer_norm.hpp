#pragma once
// torch.nn.LayerNorm over the hidden dimension, with Hugging Face's names <name>.weight and
// <name>.bias (no weight decay on either). Saves its input, mean and rstd for backward.
#include <string>

#include "models/parameter_set.hpp"
#include "models/pass_state.hpp"

namespace memtrain::models {

class LayerNorm {
 public:
  LayerNorm(ParameterSet& params, const std::string& name, int C, float eps);

  // Returns LayerNorm(x) [N, C] (tag activation, s.dtype). Keeps x, and mean, rstd [N] (f32 in
  // every mode), when training. x_f: the caller's float view of x rounded in place (Note [Views
  // rounded in place]), read instead of converting x again; null: x is read through a view here.
  core::Tensor forward(PassState& s, const core::Tensor& x, int N, const float* x_f = nullptr);
  // dx [N, C] (+=) from dout [N, C], both float views (f32_access.hpp); accumulates dgamma,
  // dbeta; releases what forward kept.
  void backward(PassState& s, float* dx, const float* dout, int N);
  void release();

 private:
  Parameter gamma_, beta_;
  int C_;
  float eps_;
  core::Tensor x_, mean_, rstd_;
};

}  // namespace memtrain::models
