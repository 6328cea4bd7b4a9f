#pragma once
// torch.nn.Linear with Hugging Face's names: <name>.weight [out, in], <name>.bias [out].
#include <string>

#include "models/parameter_set.hpp"
#include "models/pass_state.hpp"
#include "models/tensor_parallel.hpp"

namespace memtrain::models {

// How a Linear is split over a tensor-parallel group (Shoeybi et al. 2019, sec. 3).
// column: each rank holds out / tp output rows of the weight and bias (Megatron-LM's
// ColumnParallelLinear); row: each rank holds in / tp input columns of the weight and the whole
// bias, which the caller adds once after the all-reduce (RowParallelLinear). The collectives
// around them are the caller's: Note [Megatron's f and g].
enum class LinearParallel { none, column, row };

class Linear {
 public:
  // in_features, out_features: the unsharded sizes; `parallel` and `tp` decide this rank's
  // shard. Requires tp.size() to divide the split size (the model checks the config first).
  Linear(ParameterSet& params, const std::string& name, int in_features, int out_features,
         LinearParallel parallel = LinearParallel::none, const TensorParallel& tp = {});

  // Pointers are float views of activations (f32_access.hpp); the weights are read in float
  // whatever their storage, and gradients accumulate through update views.
  // out [N, out] = inp [N, in] W^T (+ b when with_bias). No math in a dry run.
  void forward(const PassState& s, float* out, const float* inp, int N,
               bool with_bias = true) const;
  // dinp [N, in] += dout W (skipped when null); dW += dout^T inp; db += column sums of dout
  // when with_bias.
  void backward(const PassState& s, float* dinp, const float* dout, const float* inp, int N,
                bool with_bias = true);

  // This rank's sizes (the shard's).
  int in_features() const { return in_; }
  int out_features() const { return out_; }
  const Parameter& weight() const { return weight_; }
  const Parameter& bias() const { return bias_; }
  Parameter& bias() { return bias_; }

 private:
  Parameter weight_, bias_;
  int in_, out_;
};

// out [N, bias.numel()] += bias, row by row: a row-parallel layer's bias, added once after the
// all-reduce of its partial outputs. No math in a dry run.
void add_bias(const PassState& s, float* out, const Parameter& bias, int N);

}  // namespace memtrain::models
