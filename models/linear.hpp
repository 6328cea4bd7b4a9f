#pragma once
// torch.nn.Linear with Hugging Face's names: <name>.weight [out, in], <name>.bias [out].
#include <string>

#include "models/parameter_set.hpp"
#include "models/pass_state.hpp"

namespace memtrain::models {

class Linear {
 public:
  Linear(ParameterSet& params, const std::string& name, int in_features, int out_features);

  // Pointers are float views of activations (f32_access.hpp); the weights are read in float
  // whatever their storage, and gradients accumulate through update views.
  // out [N, out] = inp [N, in] W^T (+ b when with_bias). No math in a dry run.
  void forward(const PassState& s, float* out, const float* inp, int N,
               bool with_bias = true) const;
  // dinp [N, in] += dout W (skipped when null); dW += dout^T inp; db += column sums of dout
  // when with_bias.
  void backward(const PassState& s, float* dinp, const float* dout, const float* inp, int N,
                bool with_bias = true);

  int in_features() const { return in_; }
  int out_features() const { return out_; }
  const Parameter& weight() const { return weight_; }
  const Parameter& bias() const { return bias_; }
  Parameter& bias() { return bias_; }

 private:
  Parameter weight_, bias_;
  int in_, out_;
};

}  // namespace memtrain::models
