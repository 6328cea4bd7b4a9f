#pragma once
#include <cstdint>

#include "kernels/cpu/scalar.hpp"
#include "kernels/philox.hpp"

namespace memtrain::kernels {

// Throws std::invalid_argument naming `fn` if dropout_p is outside [0, 1) or NH does not divide
// C: the checks every attention kernel (CPU and CUDA) makes first.
void check_attention_arguments(const char* fn, int C, int NH, float dropout_p);

// Multi-head scaled dot-product attention (Vaswani et al. 2017, eq. 1), BERT style:
// probs = softmax(Q K^T / sqrt(HS) + mask), dropped = dropout(probs), out = dropped V.
// Heads live inside C: head h uses columns [h*HS, (h+1)*HS), HS = C / NH.
// Shapes: q, k, v, out [B, T, C]; key_mask [B, T] (1 attend / 0 padding) or nullptr;
// probs [B, NH, T, T] saved for backward (softmax output before dropout).
// The dropout mask is rebuilt from `key` in the backward pass (sample = first_sample + b,
// element = ((first_head + h) * T + i) * T + j). first_head: the global index of head 0 when the
// heads are a tensor-parallel shard, so a shard draws the unsharded layer's masks. Each (b, h)
// is one task of an OpenMP loop whose GEMMs address the heads in place through leading
// dimensions (no copies). Never allocates: the dropped probabilities go through a fixed
// 64 KiB-per-thread stack buffer, T <= 16384.
// Throws std::invalid_argument (check_attention_arguments) if NH does not divide C or dropout_p
// is outside [0, 1), and if T > 16384.
template <class Scalar>
void attention_forward(Scalar* out, Scalar* probs, const Scalar* q, const Scalar* k, const Scalar* v,
                       const NoDeduce<Scalar>* key_mask, int B, int T, int C, int NH, float dropout_p,
                       const RngKey& key, std::uint64_t first_sample, int first_head = 0);

// The probabilities alone: probs [B, NH, T, T] = softmax(Q K^T / sqrt(HS) + mask), bitwise
// equal to the probs attention_forward saves for the same inputs (the same per-head code runs),
// so selective recompute (Korthikanti et al. 2022, sec. 4.2) can drop them after the forward
// pass and rebuild them for attention_backward. Bitwise only when probs has the same address
// modulo 64 bytes as the forward's buffer (the softmax's vectorised sums peel to alignment);
// tensors from the allocator (256-byte multiples) always do. Never allocates. Throws as
// attention_forward.
template <class Scalar>
void attention_probs(Scalar* probs, const Scalar* q, const Scalar* k, const NoDeduce<Scalar>* key_mask, int B, int T,
                     int C, int NH);

// Accumulates (+=) into dq, dk, dv [B, T, C]. scratch [B, NH, T, T] is a workspace. dout
// [B, T, C]; probs as saved by attention_forward; same key/first_sample as the forward pass.
template <class Scalar>
void attention_backward(Scalar* dq, Scalar* dk, Scalar* dv, Scalar* scratch, const Scalar* dout, const Scalar* probs,
                        const Scalar* q, const Scalar* k, const Scalar* v, int B, int T, int C, int NH, float dropout_p,
                        const RngKey& key, std::uint64_t first_sample, int first_head = 0);

}  // namespace memtrain::kernels
