#pragma once
// LayerNorm on the GPU: the CUDA twin of kernels/cpu/layernorm.hpp.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/kernel_context.hpp"

namespace memtrain::kernels::gpu {

// out = (x - mean) rstd gamma + beta, rstd = 1 / sqrt(var + eps), var the biased variance
// (Ba, Kiros, Hinton 2016, eq. 4), in fp32 whatever T. Shapes: x, out [N, C] (no aliasing);
// gamma, beta [C]; mean, rstd [N] in fp32 (saved for the backward pass). One warp per row, the
// variance from a second pass over the row (as the CPU: no E[x^2] - E[x]^2 cancellation).
template <class T>
void layernorm_forward(const KernelContext& ctx, T* out, float* mean, float* rstd, const T* x, const T* gamma,
                       const T* beta, int N, int C, float eps);

// Accumulates (+=) into dx [N, C], dgamma [C], dbeta [C] (dgamma, dbeta may be nullptr). With
// xhat = (x - mean) rstd and g = dout gamma: dx = rstd (g - mean_c(g) - xhat mean_c(g xhat));
// dgamma = sum_n dout xhat; dbeta = sum_n dout, summed in a fixed order (Note [Deterministic
// column sums]). Two launches: a warp per row for dx, a column pass for dgamma and dbeta.
template <class T>
void layernorm_backward(const KernelContext& ctx, T* dx, T* dgamma, T* dbeta, const T* dout, const T* x, const T* gamma,
                        const float* mean, const float* rstd, int N, int C);

}  // namespace memtrain::kernels::gpu
