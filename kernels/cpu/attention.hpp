#pragma once
#include <cstdint>

#include "kernels/cpu/philox.hpp"

namespace memtrain::kernels {

// Multi-head scaled dot-product attention (Vaswani et al. 2017, eq. 1), BERT style:
// probs = softmax(Q K^T / sqrt(HS) + mask), dropped = dropout(probs), out = dropped V.
// Heads live inside C: head h uses columns [h*HS, (h+1)*HS), HS = C / NH.
// Shapes: q, k, v, out [B, T, C]; key_mask [B, T] (1 attend / 0 padding) or nullptr;
// probs [B, NH, T, T] saved for backward (softmax output before dropout).
// The dropout mask is rebuilt from `key` in the backward pass (sample = first_sample + b,
// element = (h * T + i) * T + j). Never allocates.
void attention_forward(float* out, float* probs, const float* q, const float* k, const float* v,
                       const float* key_mask, int B, int T, int C, int NH, float dropout_p,
                       const RngKey& key, std::uint64_t first_sample);

// Accumulates (+=) into dq, dk, dv [B, T, C]. scratch [B, NH, T, T] is a workspace.
void attention_backward(float* dq, float* dk, float* dv, float* scratch, const float* dout,
                        const float* probs, const float* q, const float* k, const float* v,
                        int B, int T, int C, int NH, float dropout_p, const RngKey& key,
                        std::uint64_t first_sample);

}  // namespace memtrain::kernels
