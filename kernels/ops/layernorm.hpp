#pragma once
// LayerNorm (Ba, Kiros, Hinton 2016, eq. 4) through the op API: kernels/cpu/layernorm or
// kernels/cuda/layernorm, with their contract.
#include "kernels/op_context.hpp"

namespace memtrain::kernels::ops {

// out [N, C] = (x - mean) rstd gamma + beta over each row of x [N, C], rstd = 1 / sqrt(var + eps)
// with the biased variance; mean, rstd [N] are written for the backward pass.
void layernorm_forward(const OpContext& kc, float* out, float* mean, float* rstd, const float* x, const float* gamma,
                       const float* beta, int N, int C, float eps);

// Accumulates (+=) dx [N, C], dgamma [C], dbeta [C] (dgamma, dbeta may be null) from dout [N, C]
// and the forward's x, gamma, mean and rstd.
void layernorm_backward(const OpContext& kc, float* dx, float* dgamma, float* dbeta, const float* dout, const float* x,
                        const float* gamma, const float* mean, const float* rstd, int N, int C);

}  // namespace memtrain::kernels::ops
