#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/scalar.hpp"
#include "kernels/philox.hpp"

namespace memtrain::kernels {

// Multi-head scaled dot-product attention computed tile by tile (FlashAttention: Dao et al.
// 2022, Algorithm 1 forward with the online softmax; the backward pass recomputes each tile's
// probabilities from the saved log-sum-exp as in FlashAttention-2, Dao 2023, Algorithm 2).
// The same function as attention_forward (kernels/cpu/attention.hpp), without its
// [B, NH, T, T] probabilities: memory beyond the inputs and outputs is three 64 x 64 tiles and
// one [T] row per thread.
//   probs = softmax(Q K^T / sqrt(HS) + mask), out = dropout(probs) V, HS = C / NH.
// Heads live inside C: head h uses columns [h*HS, (h+1)*HS).
// Padding keys (key_mask 0) get probability exactly 0, as in attention_forward; a row whose keys
// are all padding outputs zeros and has lse = -inf.
// Dropout uses attention_forward's mask bit for bit (first_head as there): element
// ((first_head + h) * T + i) * T + j of global
// sample first_sample + b under `key` (apply_dropout_mask), so both kernels give the same
// result for the same key.
// Shapes: q, k, v, out [B, T, C]; key_mask [B, T] (1 attend / 0 padding) or nullptr;
// lse [B, NH, T]: log-sum-exp over j of each scaled, masked score row (natural log), saved for
// the backward pass. workspace: flash_attention_workspace_elements(T, C, NH) elements.
// Each (b, h) is one task of an OpenMP loop, so results do not depend on the thread count.
// Never allocates.
// Throws std::invalid_argument if NH does not divide C, B or T is negative, or dropout_p is
// outside [0, 1).
template <class Scalar>
void flash_attention_forward(Scalar* out, Scalar* lse, const Scalar* q, const Scalar* k, const Scalar* v,
                             const NoDeduce<Scalar>* key_mask, int B, int T, int C, int NH, float dropout_p,
                             const RngKey& key, std::uint64_t first_sample, Scalar* workspace, int first_head = 0);

// Accumulates (+=) into dq, dk, dv [B, T, C]. dout, out [B, T, C] (out as returned by the
// forward pass); lse [B, NH, T] as saved; q, k, v, key_mask, key and first_sample as in the
// forward pass. workspace as for the forward pass. Never allocates.
// Throws as flash_attention_forward.
template <class Scalar>
void flash_attention_backward(Scalar* dq, Scalar* dk, Scalar* dv, const Scalar* dout, const Scalar* out,
                              const Scalar* lse, const Scalar* q, const Scalar* k, const Scalar* v,
                              const NoDeduce<Scalar>* key_mask, int B, int T, int C, int NH, float dropout_p,
                              const RngKey& key, std::uint64_t first_sample, Scalar* workspace, int first_head = 0);

// Elements of the workspace of one flash_attention_forward/backward call: one share per thread
// the kernels use now (num_threads(), kernels/cpu/threads.hpp), each three score tiles of up to
// 64 x 64 plus 2 * 64 + T row statistics, padded to 16 elements, and 16 spare elements (the
// kernels start at the workspace's first 64-byte boundary, so that results never depend on its
// address). For B = 8, T = 512, C = 768, NH = 12 on 2 threads that is 25.9 K elements, against
// 25.2 M for attention_forward's probabilities. Any alignment of the workspace works.
// Throws std::invalid_argument if T < 0.
std::size_t flash_attention_workspace_elements(int T, int C, int NH);

}  // namespace memtrain::kernels
