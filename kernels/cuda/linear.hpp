#pragma once
// Linear layers on the GPU through cuBLASLt: the CUDA twins of kernels/cpu/linear.hpp, same
// layouts and the same accumulate-into-gradients contract.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/kernel_context.hpp"

namespace memtrain::kernels::gpu {

// y = x W^T + b (torch.nn.Linear). Shapes: out [N, OC]; inp [N, C]; weight [OC, C]; bias [OC]
// or nullptr. One cublasLtMatmul with the BIAS epilogue (the bias added as the tile is written,
// no extra pass). T = float (fp32, or TF32 tensor cores when ctx.allow_tf32), __nv_bfloat16 or
// __half (fp32 accumulation: CUBLAS_COMPUTE_32F). Uses ctx.blas_workspace only. Asynchronous on
// ctx.stream. Throws memory::CudaError when cuBLASLt finds no algorithm or fails.
template <class T>
void linear_forward(const KernelContext& ctx, T* out, const T* inp, const T* weight, const T* bias, int N, int C,
                    int OC);

// Gradients ACCUMULATE (+=), as on the CPU: dinp [N, C] += dout W; dweight [OC, C] += dout^T x;
// dbias [OC] += the column sums of dout [N, OC] (summed in fp32, in row order: deterministic).
// Any output may be nullptr to skip it. Two GEMMs with beta = 1 and one column-sum kernel.
template <class T>
void linear_backward(const KernelContext& ctx, T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                     const T* weight, int N, int C, int OC);

}  // namespace memtrain::kernels::gpu
