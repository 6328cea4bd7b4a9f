#pragma once
// Bias + exact GELU on the GPU: the CUDA twin of kernels/cpu/gelu.hpp.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/kernel_context.hpp"

namespace memtrain::kernels::gpu {

// out[n, c] = gelu(inp[n, c] + bias[c]), gelu(x) = 0.5 x (1 + erf(x / sqrt 2)) (Hendrycks &
// Gimpel 2016), computed in fp32 whatever T (float, __nv_bfloat16, __half). Shapes: out, inp
// [N, C]; bias [C] or nullptr. out may alias inp. Asynchronous on ctx.stream.
template <class T>
void bias_gelu_forward(const KernelContext& ctx, T* out, const T* inp, const T* bias, int N, int C);

// dinp [N, C] = dout * gelu'(inp + bias), gelu'(x) = Phi(x) + x phi(x), written, not added to
// (as the CPU twin, kernels/cpu/gelu.hpp); dbias [C] (nullptr to skip) += its column sums,
// reduced in a fixed order (deterministic). dinp may alias dout or inp (each element is read
// before it is written, by the same thread).
template <class T>
void bias_gelu_backward(const KernelContext& ctx, T* dinp, T* dbias, const T* dout, const T* inp, const T* bias, int N,
                        int C);

}  // namespace memtrain::kernels::gpu
