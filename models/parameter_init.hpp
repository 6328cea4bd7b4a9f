#pragma once
// Counter-based parameter initialisation (design.md, "Randomness is counter-based").
#include <cstdint>
#include <string>

namespace memtrain::models {

// x[i] ~ N(0, stddev^2) for i in [0, n): Box-Muller (Box & Muller 1958) on Philox4x32-10
// words keyed by (seed, FNV-1a hash of `name`). Element i depends only on (seed, name, i), so
// a tensor-parallel shard can draw its slice of the unsharded tensor's values.
void fill_normal(float* x, std::int64_t n, float stddev, std::uint64_t seed,
                 const std::string& name);

}  // namespace memtrain::models
