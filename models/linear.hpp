#pragma once
// torch.nn.Linear with Hugging Face's names: <name>.weight [out, in], <name>.bias [out].
#include <cstdint>
#include <string>

#include "models/parameter_set.hpp"
#include "models/pass_state.hpp"
#include "models/tensor_parallel.hpp"
#include "runtime/core/workspace.hpp"

namespace memtrain::models {

// How a Linear is split over a tensor-parallel group (Shoeybi et al. 2019, sec. 3).
// column: each rank holds out / tp output rows of the weight and bias (Megatron-LM's
// ColumnParallelLinear); row: each rank holds in / tp input columns of the weight and the whole
// bias, which the caller adds once after the all-reduce (RowParallelLinear). The collectives
// around them are the caller's: Note [Megatron's f and g].
enum class LinearParallel { none, column, row };

// A GEMM input: a float view the caller holds, a tensor, or both (a read view of that tensor).
// The bf16 GEMMs (PassState::native_bf16_gemm) read a bf16 tensor as stored, so an input given
// as its tensor is never converted to float on that path; the fp32 path makes the read view
// itself when it has only the tensor. A view with no tensor (a float sum not yet stored, or a
// gathered copy) is rounded to bf16 for the bf16 GEMMs (Bf16Operand).
class GemmInput {
 public:
  GemmInput(const float* view) : view_(view) {}      // NOLINT(google-explicit-constructor)
  GemmInput(const core::Tensor& t) : tensor_(&t) {}  // NOLINT(google-explicit-constructor)
  GemmInput(const float* view, const core::Tensor& t) : view_(view), tensor_(&t) {}

  const float* view() const { return view_; }
  const core::Tensor* tensor() const { return tensor_; }

 private:
  const float* view_ = nullptr;
  const core::Tensor* tensor_ = nullptr;
};

class Linear {
 public:
  // in_features, out_features: the unsharded sizes; `parallel` and `tp` decide this rank's
  // shard. Requires tp.size() to divide the split size (the model checks the config first).
  Linear(ParameterSet& params, const std::string& name, int in_features, int out_features,
         LinearParallel parallel = LinearParallel::none, const TensorParallel& tp = {});

  // out and dinp are float views of activations (f32_access.hpp); inputs are views or tensors
  // (GemmInput). On the fp32 path the weights are read in float whatever their storage and
  // gradients accumulate through update views; with bf16 GEMMs they are used as stored.
  // out [N, out] = inp [N, in] W^T (+ b when with_bias). No math in a dry run.
  void forward(const PassState& s, float* out, const GemmInput& inp, int N, bool with_bias = true) const;
  // dinp [N, in] += dout W (skipped when null); dW += dout^T inp; db += column sums of dout
  // when with_bias.
  void backward(const PassState& s, float* dinp, const GemmInput& dout, const GemmInput& inp, int N,
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

// A float operand [n] rounded to bf16 in a workspace slot (outside the allocator: Note
// [Workspace outside the allocator]), for oneDNN's bf16 GEMMs (Note [bf16 GEMMs through
// oneDNN]). Exact for values read from a bf16 tensor; a float sum not yet stored is rounded as
// storing it would round it. Timed as the op "convert.from_f32". Compute mode only.
class Bf16Operand {
 public:
  Bf16Operand(const PassState& s, const float* x, std::int64_t n);
  const std::uint16_t* data() const { return reinterpret_cast<const std::uint16_t*>(lease_.data()); }

 private:
  core::Workspace::Lease lease_;
};

// out [N, OC] = inp [N, C] weight [OC, C]^T (+ bias [OC] when defined), inp and out float
// views: on bf16 operands through oneDNN when s.native_bf16_gemm and the weight is bf16 (the
// weight read as stored, inp rounded to bf16), else with sgemm on float views, a 16-bit weight
// converted a block of rows at a time (Note [16-bit weights a block at a time]). Compute mode
// only. Used by Linear and by the MLM head's tied decoder.
void linear_forward(const PassState& s, float* out, const GemmInput& inp, const core::Tensor& weight,
                    const core::Tensor& bias, int N, int C, int OC);
// Its backward: dinp [N, C] += dout [N, OC] weight (skipped when null); dweight [OC, C] +=
// dout^T inp and dbias [OC] += column sums of dout, each skipped when undefined, written
// instead of added when s.grads_zero. The same paths as linear_forward; a 16-bit weight
// gradient of the weight's dtype is rounded a block at a time (dinp's sum then runs over blocks
// of the weight: equal to within rounding).
void linear_backward(const PassState& s, float* dinp, const GemmInput& dout, const GemmInput& inp,
                     const core::Tensor& weight, const core::Tensor& dweight, const core::Tensor& dbias, int N, int C,
                     int OC);

// out [N, bias.numel()] += bias, row by row: a row-parallel layer's bias, added once after the
// all-reduce of its partial outputs. No math in a dry run.
void add_bias(const PassState& s, float* out, const Parameter& bias, int N);

}  // namespace memtrain::models
