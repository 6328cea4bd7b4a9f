// NormSketch (Note [A sketch of the norm of a sum]) against its closed forms: with no more
// elements than buckets each bucket holds one +-x_j and the estimate is exact; the sketch is
// linear, so the ranks' sketches sum to the sketch of the summed vector; over independent sign
// draws the squared estimate's mean is ||x||^2 and its relative spread about sqrt(2 / K) (AMS).
#include "runtime/train/norm_sketch.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace memtrain::train {
namespace {

std::vector<float> normal(std::int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = d(gen);
  return v;
}

double norm2(const std::vector<float>& x) {
  double s = 0;
  for (float v : x) s += double{v} * v;
  return s;
}

TEST(NormSketch, FewerElementsThanBucketsAreExact) {
  const auto x = normal(NormSketch::kBuckets, 1);
  NormSketch s(7, 3);
  s.add(0, x.data(), static_cast<std::int64_t>(x.size()));
  EXPECT_NEAR(s.norm(), std::sqrt(norm2(x)), 1e-12 * std::sqrt(norm2(x)));
}

// Two "ranks" with their own vectors, sketched under the same (seed, step): the summed buckets
// are the sketch of the summed vector, tensor by tensor.
TEST(NormSketch, SketchesOfTheRanksSumToTheSketchOfTheSum) {
  const std::int64_t n = 10'000;
  const auto a = normal(n, 2), b = normal(n, 3), c = normal(300, 4);
  std::vector<float> sum(static_cast<std::size_t>(n));
  for (std::int64_t j = 0; j < n; ++j) sum[j] = a[j] + b[j];
  NormSketch ra(11, 5), rb(11, 5), whole(11, 5);
  ra.add(0, a.data(), n);
  ra.add(1, c.data(), 300);
  rb.add(0, b.data(), n);
  whole.add(0, sum.data(), n);
  whole.add(1, c.data(), 300);
  for (int k = 0; k < NormSketch::kBuckets; ++k) {
    EXPECT_NEAR(ra.buckets()[k] + rb.buckets()[k], whole.buckets()[k], 1e-4) << k;
  }
}

// Over 400 steps' signs: mean of the squared estimate within 3 standard errors of ||x||^2, and
// its relative spread near sqrt(2 / K) = 0.0625, for a dense vector and a heavy-tailed one
// (a few elements hold most of the norm).
TEST(NormSketch, TheSquaredEstimateIsUnbiasedWithTheAmsSpread) {
  const std::int64_t n = 50'000;
  auto dense = normal(n, 5), heavy = normal(n, 6);
  for (std::int64_t j = 0; j < n; j += 997) heavy[j] *= 30.0f;
  for (const auto* x : {&dense, &heavy}) {
    const double truth = norm2(*x);
    const int draws = 400;
    double mean = 0, sq = 0;
    for (int step = 0; step < draws; ++step) {
      NormSketch s(13, static_cast<std::uint64_t>(step));
      s.add(0, x->data(), n);
      const double e = s.norm() * s.norm() / truth;
      mean += e;
      sq += e * e;
    }
    mean /= draws;
    const double spread = std::sqrt(sq / draws - mean * mean);
    EXPECT_NEAR(mean, 1.0, 3 * spread / std::sqrt(double{draws}));
    EXPECT_GT(spread, 0.5 * std::sqrt(2.0 / NormSketch::kBuckets));
    EXPECT_LT(spread, 1.5 * std::sqrt(2.0 / NormSketch::kBuckets));
  }
}

TEST(NormSketch, ANonFiniteElementMakesTheEstimateNonFinite) {
  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    auto x = normal(2000, 7);
    x[1234] = bad;
    NormSketch s(1, 1);
    s.add(0, x.data(), 2000);
    EXPECT_FALSE(std::isfinite(s.norm())) << bad;
  }
}

}  // namespace
}  // namespace memtrain::train
