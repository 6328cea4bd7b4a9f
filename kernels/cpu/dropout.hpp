#pragma once
#include <cstdint>

#include "kernels/cpu/philox.hpp"

namespace memtrain::kernels {

// Inverted dropout: out = inp * keep / (1 - p), keep = philox_uniform(key, sample, e) >= p,
// where the tensor is [rows, per_sample] and row r belongs to global sample first_sample + r.
// No mask is stored: the backward pass rebuilds it from the same key. p == 0 copies.
// out may alias inp.
void dropout_forward(float* out, const float* inp, int rows, long per_sample, float p,
                     const RngKey& key, std::uint64_t first_sample);

// dinp = dout * keep / (1 - p) (overwrites; may alias dout).
void dropout_backward(float* dinp, const float* dout, int rows, long per_sample, float p,
                      const RngKey& key, std::uint64_t first_sample);

}  // namespace memtrain::kernels
