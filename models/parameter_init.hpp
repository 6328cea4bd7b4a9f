#pragma once
// Counter-based parameter initialisation (design.md, "Randomness is counter-based").
#include <cstdint>
#include <string>

namespace memtrain::models {

// x[i] ~ N(0, stddev^2) for i in [0, n): Box-Muller (Box & Muller 1958) on Philox4x32-10
// words keyed by (seed, FNV-1a hash of `name`). Element i depends only on (seed, name, i), so
// a tensor-parallel shard can draw its slice of the unsharded tensor's values.
void fill_normal(float* x, std::int64_t n, float stddev, std::uint64_t seed, const std::string& name);

// A strided slice of fill_normal's stream: x[r * cols + c] = element first + r * stride + c
// of fill_normal(..., seed, name), for x [rows, cols]. A row-parallel shard [out, in / tp] is
// rows = out, cols = in / tp, first = tp_rank * in / tp, stride = in, so tp ranks draw exactly
// the unsharded tensor's values (Megatron-LM's init from the master weight, without building
// it). fill_normal(x, n, ...) equals fill_normal_strided(x, 1, n, ..., 0, n).
void fill_normal_strided(float* x, std::int64_t rows, std::int64_t cols, float stddev, std::uint64_t seed,
                         const std::string& name, std::int64_t first, std::int64_t stride);

}  // namespace memtrain::models
