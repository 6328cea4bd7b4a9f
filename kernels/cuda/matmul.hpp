#pragma once
// Strided batched GEMM through cuBLASLt, row-major like kernels/cpu/matmul.hpp, for the ops
// that address heads inside interleaved tensors (attention) and for the linear layers.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/kernel_context.hpp"

namespace memtrain::kernels::gpu {

// C = alpha op(A) op(B) + beta C, all row-major, `batch` times: matrix i of X starts at
// X + i * stride_x elements; lda/ldb/ldc are the row strides of the stored matrices (as
// kernels::matmul_strided_batched). bias [N] (or nullptr) is added to every row of C by
// cuBLASLt's BIAS epilogue. T = float (fp32, or TF32 when ctx.allow_tf32), __nv_bfloat16 or
// __half, with fp32 accumulation and fp32 alpha/beta. With beta == 0, C is not read. Uses
// ctx.blas_workspace only (Note [Fixed workspaces]); asynchronous on ctx.stream. Throws
// memory::CudaError when cuBLASLt has no algorithm for the shape or fails.
template <class T>
void matmul_strided_batched(const KernelContext& ctx, T* C, const T* A, const T* B, int batch, int M, int N, int K,
                            bool trans_a, bool trans_b, long long stride_a, long long stride_b, long long stride_c,
                            int lda, int ldb, int ldc, float alpha = 1.0f, float beta = 0.0f, const T* bias = nullptr);

// matmul_strided_batched with an fp32 C whatever the inputs (no bias): attention's scores of
// bf16/fp16 operands stay in fp32 until the softmax (Note [Attention scores in fp32]), and the
// bf16 linears accumulate their fp32 gradients (beta = 1; with beta == 0, C is not read).
template <class T>
void matmul_strided_batched_f32_out(const KernelContext& ctx, float* C, const T* A, const T* B, int batch, int M, int N,
                                    int K, bool trans_a, bool trans_b, long long stride_a, long long stride_b,
                                    long long stride_c, int lda, int ldb, int ldc, float alpha, float beta = 0.0f);

}  // namespace memtrain::kernels::gpu
