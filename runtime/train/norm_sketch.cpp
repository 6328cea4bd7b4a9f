#include "runtime/train/norm_sketch.hpp"

#include <algorithm>
#include <cmath>

namespace memtrain::train {
namespace {
// The Philox site that tells the sketch's signs apart from dropout's streams.
constexpr std::uint32_t kSketchLayer = 0xC0FFEE;
constexpr std::int64_t kBitsPerBlock = 128;  // one Philox block: 4 words of 32 signs
static_assert(NormSketch::kBuckets % kBitsPerBlock == 0);
}  // namespace

NormSketch::NormSketch(std::uint64_t seed, std::uint64_t step) : seed_(seed), step_(step), buckets_(kBuckets, 0.0) {}

void NormSketch::add(std::uint32_t tensor, const float* x, std::int64_t n) {
  const kernels::PhiloxStream signs(kernels::RngKey{seed_, step_, kSketchLayer, tensor, 0});
  double* s = buckets_.data();
  for (std::int64_t lo = 0; lo < n; lo += kBitsPerBlock) {
    const auto words = signs.block(0, static_cast<std::uint64_t>(lo / kBitsPerBlock));
    const std::int64_t count = std::min(kBitsPerBlock, n - lo);
    // kBuckets is a multiple of kBitsPerBlock, so the block's buckets are contiguous.
    double* out = s + lo % kBuckets;
    for (std::int64_t j = 0; j < count; ++j) {
      const bool negative = ((words[j / 32] >> (j % 32)) & 1u) != 0;
      const double v = x[lo + j];
      out[j] += negative ? -v : v;
    }
  }
}

double NormSketch::norm() const {
  double sum = 0;
  for (double b : buckets_) sum += b * b;
  return std::sqrt(sum);
}

}  // namespace memtrain::train
