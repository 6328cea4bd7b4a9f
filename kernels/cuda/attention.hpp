#pragma once
// Multi-head attention on the GPU, unfused: the CUDA twin of kernels/cpu/attention.hpp with the
// same contract (probabilities saved for the backward pass, the same dropout masks).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/kernel_context.hpp"
#include "kernels/philox.hpp"

namespace memtrain::kernels::gpu {

// Bytes of ctx.scratch that attention_forward and attention_backward need: one [B, NH, T, T]
// buffer, of fp32 scores for 16-bit T (Note [Attention scores in fp32]) and of the dropped
// probabilities with dropout (0 for fp32 without dropout). The owner of the context sizes its
// scratch for the largest shape up front, so the allocations of a step do not depend on the
// device (a dry run still predicts a GPU run).
std::size_t attention_scratch_bytes(int B, int T, int NH, float dropout_p, std::size_t element_bytes);

// probs [B, NH, T, T] = softmax(Q K^T / sqrt(HS) + mask); out [B, T, C] = dropout(probs) V
// (Vaswani et al. 2017, eq. 1), heads interleaved in C (head h: columns [h HS, (h+1) HS)).
// key_mask [B, T] (1 attend, 0 padding) or nullptr. Dropout draws the CPU's mask: sample
// first_sample + b, element ((first_head + h) T + i) T + j. Per sample b: one cuBLASLt GEMM
// batched over the NH heads (stride HS inside the rows), the masked softmax over all rows, then
// dropout into ctx.scratch and a second batched GEMM. Throws std::invalid_argument if NH does not
// divide C, dropout_p is outside [0, 1) or ctx.scratch is smaller than attention_scratch_bytes.
template <class T>
void attention_forward(const KernelContext& ctx, T* out, T* probs, const T* q, const T* k, const T* v,
                       const T* key_mask, int B, int T_, int C, int NH, float dropout_p, const RngKey& key,
                       std::uint64_t first_sample, int first_head = 0);

// Accumulates (+=) into dq, dk, dv [B, T, C]; scratch [B, NH, T, T] holds the gradient of the
// scores (as on the CPU), ctx.scratch the dropped probabilities again. probs as saved by
// attention_forward; the same key, first_sample and first_head.
template <class T>
void attention_backward(const KernelContext& ctx, T* dq, T* dk, T* dv, T* scratch, const T* dout, const T* probs,
                        const T* q, const T* k, const T* v, int B, int T_, int C, int NH, float dropout_p,
                        const RngKey& key, std::uint64_t first_sample, int first_head = 0);

}  // namespace memtrain::kernels::gpu
