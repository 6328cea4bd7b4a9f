#include "models/parameter_init.hpp"

#include <Random123/boxmuller.hpp>
#include <limits>

#include "kernels/cpu/philox.hpp"

namespace memtrain::models {

namespace {

// FNV-1a, 64 bit (Fowler, Noll, Vo): a fixed, portable hash (std::hash is neither).
std::uint64_t fnv1a64(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

void fill_normal(float* x, std::int64_t n, float stddev, std::uint64_t seed,
                 const std::string& name) {
  // step = max marks the initialisation domain: no training step (dropout) uses it.
  const std::uint64_t h = fnv1a64(name);
  const kernels::RngKey key{seed, std::numeric_limits<std::uint64_t>::max(),
                            static_cast<std::uint32_t>(h), static_cast<std::uint32_t>(h >> 32), 0};
  const kernels::PhiloxStream stream(key);
  for (std::int64_t i = 0; i < n; i += 4) {
    const auto w = stream.block(/*sample=*/0, static_cast<std::uint64_t>(i) / 4);
    const r123::float2 a = r123::boxmuller(w[0], w[1]);
    const r123::float2 b = r123::boxmuller(w[2], w[3]);
    const float z[4] = {a.x, a.y, b.x, b.y};
    for (std::int64_t j = 0; j < 4 && i + j < n; ++j) x[i + j] = stddev * z[j];
  }
}

}  // namespace memtrain::models
