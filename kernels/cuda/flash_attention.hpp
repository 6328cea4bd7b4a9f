#pragma once
// FlashAttention on the GPU: the CUDA twin of kernels/cpu/flash_attention.hpp (memory.attention:
// flash). No [B, NH, T, T] tensor exists at any point; the backward pass recomputes the
// probabilities from the saved log-sum-exp.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/kernel_context.hpp"
#include "kernels/philox.hpp"

namespace memtrain::kernels::gpu {

// The largest head size the kernels take (BERT-Base and -Large: 64).
inline constexpr int kFlashMaxHeadSize = 128;

// out [B, T, C] = dropout(softmax(Q K^T / sqrt(HS) + mask)) V and lse [B, NH, T] (fp32, natural
// log of each scaled, masked score row's sum of exponentials; -inf for a row whose keys are all
// padding, whose output is zeros), as kernels::flash_attention_forward: the online softmax of
// Dao et al. 2022 (Algorithm 1), one thread per query row, key tiles staged in shared memory,
// fp32 arithmetic whatever T. Dropout draws attention_forward's mask (sample first_sample + b,
// element ((first_head + h) T + i) T + j). Needs no scratch. Throws std::invalid_argument if NH
// does not divide C, HS > kFlashMaxHeadSize or dropout_p is outside [0, 1).
template <class T>
void flash_attention_forward(const KernelContext& ctx, T* out, float* lse, const T* q, const T* k, const T* v,
                             const T* key_mask, int B, int T_, int C, int NH, float dropout_p, const RngKey& key,
                             std::uint64_t first_sample, int first_head = 0);

// Accumulates (+=) into dq, dk, dv [B, T, C] from dout, the forward's out and lse
// (FlashAttention-2's backward, Dao 2023, Algorithm 2, with D_i = dout_i . out_i). Two kernels,
// neither with atomics: one thread per key accumulates dK and dV over every query, one thread
// per query accumulates dQ over every key, so the result repeats bit for bit. Needs no scratch.
template <class T>
void flash_attention_backward(const KernelContext& ctx, T* dq, T* dk, T* dv, const T* dout, const T* out,
                              const float* lse, const T* q, const T* k, const T* v, const T* key_mask, int B, int T_,
                              int C, int NH, float dropout_p, const RngKey& key, std::uint64_t first_sample,
                              int first_head = 0);

}  // namespace memtrain::kernels::gpu
