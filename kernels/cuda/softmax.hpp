#pragma once
// Row softmax with a key mask on the GPU: the CUDA twin of kernels/cpu/softmax.hpp.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/kernel_context.hpp"

namespace memtrain::kernels::gpu {

// out[r, j] = softmax_j(scale inp[r, j]) over the j with key_mask[r / rows_per_mask, j] != 0
// (Vaswani et al. 2017 eq. 1); masked entries get exactly 0 and a fully masked row is all zeros.
// Shapes: out, inp [rows, cols] (out may alias inp); key_mask [rows / rows_per_mask, cols] or
// nullptr. One warp per row, fp32 arithmetic. Asynchronous on ctx.stream.
template <class T>
void masked_softmax_forward(const KernelContext& ctx, T* out, const T* inp, const T* key_mask, int rows, int cols,
                            int rows_per_mask, float scale);

// masked_softmax_forward reading fp32 scores and writing T probabilities (attention's scores of
// 16-bit operands: Note [Attention scores in fp32]). out must not alias scores.
template <class T>
void masked_softmax_forward_from_f32(const KernelContext& ctx, T* out, const float* scores, const T* key_mask, int rows,
                                     int cols, int rows_per_mask, float scale);

// dinp = scale probs (dout - sum_j dout probs), per row (overwrites; may alias dout).
template <class T>
void masked_softmax_backward(const KernelContext& ctx, T* dinp, const T* dout, const T* probs, int rows, int cols,
                             float scale);

}  // namespace memtrain::kernels::gpu
