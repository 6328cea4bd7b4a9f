#pragma once
// The layers' bias + GELU, forward and backward, on tensors of any float storage: f32 tensors
// go to the float kernels in place, 16-bit ones to the chunked 16-bit kernels (Note [16-bit
// operands converted a chunk at a time]) instead of whole float copies.
#include "models/parameter.hpp"
#include "models/pass_state.hpp"
#include "runtime/core/tensor.hpp"

namespace memtrain::models {

// out [N, C] = gelu(inp + bias.value), out and inp of the pass's dtype. No-op in a dry run.
void bias_gelu_forward(PassState& s, core::Tensor& out, const core::Tensor& inp, const Parameter& bias, int N, int C);

// dinp [N, C] = the gradient through GELU of dout (written: dinp starts at zero), and
// bias.grad (+=) [C]; dout, inp, dinp of the pass's dtype. No-op in a dry run.
void bias_gelu_backward(PassState& s, core::Tensor& dinp, Parameter& bias, const core::Tensor& dout,
                        const core::Tensor& inp, int N, int C);

}  // namespace memtrain::models
