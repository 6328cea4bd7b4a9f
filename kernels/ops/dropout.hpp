#pragma once
// Inverted dropout with counter-based Philox masks through the op API: kernels/cpu/dropout or
// kernels/cuda/dropout, which draw the same words from the same counters, so both devices drop
// the same elements for the same RngKey.
#include <cstdint>

#include "kernels/op_context.hpp"
#include "kernels/philox.hpp"

namespace memtrain::kernels::ops {

// out [rows, per_sample] = inp * keep / (1 - p); row r is sample first_sample + r and its
// element i has index first_element + i in that sample. out may alias inp. Throws
// std::invalid_argument for p < 0 or NaN.
void dropout_forward(const OpContext& kc, float* out, const float* inp, int rows, long per_sample, float p,
                     const RngKey& key, std::uint64_t first_sample, std::uint64_t first_element = 0);

// dinp = dout * keep / (1 - p) with the forward's mask (overwrites; may alias dout).
void dropout_backward(const OpContext& kc, float* dinp, const float* dout, int rows, long per_sample, float p,
                      const RngKey& key, std::uint64_t first_sample, std::uint64_t first_element = 0);

// out = dropout(inp) + residual, the mask of dropout_forward (out may alias inp).
void dropout_residual_forward(const OpContext& kc, float* out, const float* inp, const float* residual, int rows,
                              long per_sample, float p, const RngKey& key, std::uint64_t first_sample,
                              std::uint64_t first_element = 0);

}  // namespace memtrain::kernels::ops
