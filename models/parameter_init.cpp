#include "models/parameter_init.hpp"

#include <Random123/boxmuller.hpp>
#include <limits>

#include "kernels/philox.hpp"

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

void fill_normal(float* x, std::int64_t n, float stddev, std::uint64_t seed, const std::string& name) {
  fill_normal_strided(x, 1, n, stddev, seed, name, 0, n);
}

void fill_normal_strided(float* x, std::int64_t rows, std::int64_t cols, float stddev, std::uint64_t seed,
                         const std::string& name, std::int64_t first, std::int64_t stride) {
  // step = max marks the initialisation domain: no training step (dropout) uses it.
  const std::uint64_t h = fnv1a64(name);
  const kernels::RngKey key{seed, std::numeric_limits<std::uint64_t>::max(), static_cast<std::uint32_t>(h),
                            static_cast<std::uint32_t>(h >> 32), 0};
  const kernels::PhiloxStream stream(key);
  // Element e is lane e % 4 of block e / 4: Box-Muller on words (0, 1) gives lanes 0 and 1,
  // on words (2, 3) lanes 2 and 3. A row may start and end inside a block.
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = x + r * cols;
    const std::int64_t e0 = first + r * stride;
    for (std::int64_t c = 0; c < cols;) {
      const std::int64_t e = e0 + c;
      const auto w = stream.block(/*sample=*/0, static_cast<std::uint64_t>(e) / 4);
      const r123::float2 a = r123::boxmuller(w[0], w[1]);
      const r123::float2 b = r123::boxmuller(w[2], w[3]);
      const float z[4] = {a.x, a.y, b.x, b.y};
      for (std::int64_t lane = e % 4; lane < 4 && c < cols; ++lane, ++c) row[c] = stddev * z[lane];
    }
  }
}

}  // namespace memtrain::models
