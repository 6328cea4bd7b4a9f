#pragma once
// Softmax cross-entropy over the masked positions on the GPU: the CUDA twin of
// kernels/cpu/cross_entropy.hpp.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/kernel_context.hpp"

namespace memtrain::kernels::gpu {

// Bytes of ctx.scratch that softmax_cross_entropy_forward_backward needs for M rows.
std::size_t cross_entropy_scratch_bytes(int M);

// logits [M, V]; targets [M] in [0, V) (device memory). Writes dlogits [M, V] (overwrites; may
// alias logits) = (softmax(logits) - onehot(target)) grad_scale and returns the SUM over rows of
// -log p(target): per-row losses in fp32 (max-subtracted), summed in double in row order
// (deterministic). *num_correct (host pointer, may be null) gets the rows whose first argmax is
// the target (torch.argmax's tie rule). dlogits may be nullptr (forward only, evaluation).
// Synchronizes ctx.stream (the loss comes back to the host). Throws std::out_of_range naming the
// first bad row when a target is outside [0, V); nothing is written to dlogits then.
template <class T>
double softmax_cross_entropy_forward_backward(const KernelContext& ctx, T* dlogits, const T* logits,
                                              const std::int32_t* targets, int M, int V, float grad_scale,
                                              std::int64_t* num_correct);

}  // namespace memtrain::kernels::gpu
