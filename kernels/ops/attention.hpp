#pragma once
// Multi-head self-attention's core, softmax(Q K^T / sqrt(HS) + mask) V with dropout on the
// probabilities (Vaswani et al. 2017, eq. 1), through the op API: the unfused form of
// kernels/cpu/attention and kernels/cuda/attention, and the flash form (Dao et al. 2022) of
// kernels/cpu/flash_attention and kernels/cuda/flash_attention, with their contracts.
#include <cstddef>
#include <cstdint>

#include "kernels/op_context.hpp"
#include "kernels/philox.hpp"

namespace memtrain::kernels::ops {

// out [B, T, C] and the dropped probabilities probs [B, NH, T, T] from q, k, v [B, T, C] (heads of
// HS = C / NH, first_head the index of this rank's first head under tensor parallelism) and
// key_mask [B, T] (1 keep, 0 masked; may be null). Throws std::invalid_argument if NH does not
// divide C or dropout_p is outside [0, 1).
void attention_forward(const OpContext& kc, float* out, float* probs, const float* q, const float* k, const float* v,
                       const float* key_mask, int B, int T, int C, int NH, float dropout_p, const RngKey& key,
                       std::uint64_t first_sample, int first_head = 0);

// The softmax probabilities of attention_forward before dropout, recomputed from q, k and the
// mask (selective recompute); CPU only so far.
void attention_probs(const OpContext& kc, float* probs, const float* q, const float* k, const float* key_mask, int B,
                     int T, int C, int NH);

// Accumulates (+=) dq, dk, dv [B, T, C] from dout [B, T, C] and the forward's probs; scratch
// [B, NH, T, T] is a workspace.
void attention_backward(const OpContext& kc, float* dq, float* dk, float* dv, float* scratch, const float* dout,
                        const float* probs, const float* q, const float* k, const float* v, int B, int T, int C, int NH,
                        float dropout_p, const RngKey& key, std::uint64_t first_sample, int first_head = 0);

// Bytes of the GPU's fixed scratch (the KernelContext's) that attention_forward and
// attention_backward need on `device` for B sequences of T tokens, NH heads, dropout p and
// element_bytes bytes an element (one [B, NH, T, T] buffer, or none: kernels/cuda/attention's
// attention_scratch_bytes); 0 on the CPU, whose caller passes the backward's scratch itself.
// Throws std::runtime_error for a GPU in a build without CUDA.
std::size_t attention_workspace_bytes(Device device, int B, int T, int NH, float dropout_p, std::size_t element_bytes);

// Elements of the host workspace flash_attention_forward and _backward take at this shape:
// the CPU's per-thread tiles; 0 on the GPU, whose kernels keep their tiles on chip.
std::size_t flash_attention_workspace_elements(const OpContext& kc, int T, int C, int NH);

// out [B, T, C] and lse [B, NH, T] (the rows' log-sum-exp, for the backward pass) without
// materialising [T, T]; arguments as attention_forward, workspace as
// flash_attention_workspace_elements says.
void flash_attention_forward(const OpContext& kc, float* out, float* lse, const float* q, const float* k,
                             const float* v, const float* key_mask, int B, int T, int C, int NH, float dropout_p,
                             const RngKey& key, std::uint64_t first_sample, float* workspace, int first_head = 0);

// Accumulates (+=) dq, dk, dv [B, T, C] from dout and the forward's out and lse.
void flash_attention_backward(const OpContext& kc, float* dq, float* dk, float* dv, const float* dout, const float* out,
                              const float* lse, const float* q, const float* k, const float* v, const float* key_mask,
                              int B, int T, int C, int NH, float dropout_p, const RngKey& key,
                              std::uint64_t first_sample, float* workspace, int first_head = 0);

}  // namespace memtrain::kernels::ops
