#pragma once
// Benchmark operands drawn as BERT initialises its weights: N(0, 0.02^2) (Devlin et al. 2019,
// initializer_range), so that no GEMM or conversion runs on denormals or overflows, and their
// 16-bit bit patterns.
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/half_convert.hpp"

namespace memtrain::bench {

// n floats from N(0, 0.02^2), the same for the same seed.
inline std::vector<float> bert_normal(std::size_t n, unsigned seed) {
  std::vector<float> x(n);
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  for (auto& e : x) e = dist(gen);
  return x;
}

// x rounded to `format` (nearest even), as bit patterns.
inline std::vector<std::uint16_t> to_half(const std::vector<float>& x, kernels::HalfFormat format) {
  std::vector<std::uint16_t> h(x.size());
  kernels::convert_float_to_half(h.data(), x.data(), static_cast<std::int64_t>(x.size()), format);
  return h;
}

}  // namespace memtrain::bench
