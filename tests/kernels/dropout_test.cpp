#include "kernels/cpu/dropout.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "tests/kernels/test_util.hpp"

namespace memtrain::kernels {
namespace {

constexpr int kRows = 8;
constexpr long kPerSample = 100003;  // not a multiple of 4 or of the task size

// Inverted dropout on ones: the dropped fraction is p within 6 binomial standard errors
// (sqrt(p(1-p)/n) = 3.4e-4 for n = 8e5), kept values are exactly 1 / (1 - p), and the mean
// stays 1 (the point of inverted scaling).
TEST(DropoutForward, DropsFractionPAndScalesKeptValues) {
  const RngKey key{.seed = 3, .step = 1, .layer = 0, .site = 1};
  for (const float p : {0.1f, 0.5f}) {
    std::vector<float> x(kRows * kPerSample, 1.0f);
    dropout_forward(x.data(), x.data(), kRows, kPerSample, p, key, 0);
    const double n = double(x.size());
    std::int64_t dropped = 0;
    double sum = 0;
    for (const float v : x) {
      if (v == 0.0f) {
        ++dropped;
      } else {
        EXPECT_FLOAT_EQ(v, 1.0f / (1.0f - p));
      }
      sum += v;
    }
    EXPECT_NEAR(dropped / n, p, 6 * std::sqrt(p * (1 - p) / n)) << "p = " << p;
    EXPECT_NEAR(sum / n, 1.0, 6 * std::sqrt(p / (1 - p) / n)) << "p = " << p;
  }
}

// Each element follows its own uniform (Note [Philox key derivation]): kept, and scaled, exactly
// when philox_uniform(key, sample, element) >= p, through the leading partial block, the
// whole spans of Philox blocks and a last partial span, with an odd first element.
TEST(DropoutForward, KeepsExactlyTheElementsWhoseUniformIsAtLeastP) {
  const RngKey key{.seed = 11, .step = 5, .layer = 2, .site = 3};
  const float p = 0.3f;
  const long per_sample = 1000;
  const std::uint64_t first_sample = 7, first_element = 13;
  std::vector<float> x(2 * per_sample);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 1.0f + static_cast<float>(i);
  const auto in = x;
  dropout_forward(x.data(), x.data(), 2, per_sample, p, key, first_sample, first_element);
  for (int r = 0; r < 2; ++r) {
    for (long e = 0; e < per_sample; ++e) {
      const std::size_t i = static_cast<std::size_t>(r * per_sample + e);
      const bool kept = philox_uniform(key, first_sample + r, first_element + e) >= p;
      ASSERT_EQ(x[i], kept ? in[i] * (1.0f / (1.0f - p)) : 0.0f) << "row " << r << " element " << e;
    }
  }
}

// The pair form applies one mask to both arrays: each equals apply_dropout_mask on its own,
// bit for bit, with an odd start and a length that leaves a tail.
TEST(ApplyDropoutMaskPair, EachArrayGetsTheSingleMask) {
  const PhiloxStream stream(RngKey{.seed = 4, .step = 9, .layer = 1, .site = 0});
  for (const std::uint64_t first : {0ULL, 3ULL, 130ULL}) {
    const std::int64_t n = 16384 + 7;
    std::vector<float> x(static_cast<std::size_t>(n)), y(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      x[static_cast<std::size_t>(i)] = 1.0f + static_cast<float>(i);
      y[static_cast<std::size_t>(i)] = -0.5f * static_cast<float>(i) - 2.0f;
    }
    auto x_ref = x, y_ref = y;
    apply_dropout_mask_pair(x.data(), y.data(), n, 0.25f, stream, 5, first);
    apply_dropout_mask(x_ref.data(), n, 0.25f, stream, 5, first);
    apply_dropout_mask(y_ref.data(), n, 0.25f, stream, 5, first);
    EXPECT_EQ(x, x_ref) << "first element " << first;
    EXPECT_EQ(y, y_ref) << "first element " << first;
  }
}

// Neighbouring elements are independent: P(both dropped) = p^2 within 6 standard errors.
TEST(DropoutForward, NeighbouringElementsAreIndependent) {
  const float p = 0.3f;
  std::vector<float> x(kRows * kPerSample, 1.0f);
  dropout_forward(x.data(), x.data(), kRows, kPerSample, p, RngKey{.seed = 8}, 0);
  std::int64_t both = 0, pairs = 0;
  for (std::size_t i = 0; i + 1 < x.size(); i += 2, ++pairs) both += x[i] == 0 && x[i + 1] == 0;
  const double q = double(p) * p;
  EXPECT_NEAR(double(both) / pairs, q, 6 * std::sqrt(q * (1 - q) / pairs));
}

// A row's mask depends on its global sample index, not on its position in the batch: two
// half batches give the same result as the whole batch (batch-split invariance).
TEST(DropoutForward, MaskDependsOnGlobalSampleNotBatchSplit) {
  const RngKey key{.seed = 11, .step = 4};
  std::vector<float> whole(kRows * 1000, 1.0f), halves(kRows * 1000, 1.0f);
  dropout_forward(whole.data(), whole.data(), kRows, 1000, 0.2f, key, 40);
  dropout_forward(halves.data(), halves.data(), kRows / 2, 1000, 0.2f, key, 40);
  dropout_forward(halves.data() + kRows / 2 * 1000, halves.data() + kRows / 2 * 1000, kRows / 2, 1000, 0.2f, key,
                  40 + kRows / 2);
  EXPECT_EQ(whole, halves);
  for (long e = 0; e < 1000; ++e) {
    EXPECT_EQ(whole[3 * 1000 + e] == 0.0f, philox_uniform(key, 43, e) < 0.2f);
  }
}

// The backward pass rebuilds the forward mask from the key: dinp = dout * keep / (1 - p).
TEST(DropoutBackward, RebuildsTheForwardMask) {
  const RngKey key{.seed = 5, .site = 2};
  const int rows = 3;
  const long n = 5001;
  std::vector<double> ones(rows * n, 1.0), mask(rows * n);
  dropout_forward(mask.data(), ones.data(), rows, n, 0.4f, key, 9);
  std::vector<double> dout(rows * n), din(rows * n);
  for (std::size_t i = 0; i < dout.size(); ++i) dout[i] = std::sin(double(i));
  dropout_backward(din.data(), dout.data(), rows, n, 0.4f, key, 9);
  for (std::size_t i = 0; i < dout.size(); ++i) EXPECT_EQ(din[i], dout[i] * mask[i]);
}

// The backward pass against central finite differences of L = <dropout(x), G> in double.
TEST(DropoutBackward, MatchesFiniteDifferences) {
  const RngKey key{.seed = 12, .layer = 3};
  const int rows = 2;
  const long n = 37;
  auto x = testing::random_normal(rows * n, 1);
  const auto G = testing::random_normal(rows * n, 2);
  auto loss = [&] {
    std::vector<double> y(rows * n);
    dropout_forward(y.data(), x.data(), rows, n, 0.3f, key, 4);
    return testing::dot(y, G);
  };
  std::vector<double> dx(rows * n);
  dropout_backward(dx.data(), G.data(), rows, n, 0.3f, key, 4);
  EXPECT_LT(testing::max_relative_error(dx, testing::numeric_gradient(x, loss)), 1e-6);
}

TEST(DropoutForward, ZeroProbabilityCopiesAndOneZeroes) {
  std::vector<float> x = {1, 2, 3, 4, 5}, out(5, -1.0f);
  dropout_forward(out.data(), x.data(), 1, 5, 0.0f, RngKey{}, 0);
  EXPECT_EQ(out, x);
  dropout_forward(out.data(), x.data(), 1, 5, 1.0f, RngKey{}, 0);
  EXPECT_EQ(out, std::vector<float>(5, 0.0f));
}

TEST(DropoutForward, RejectsNegativeOrNanProbability) {
  std::vector<float> x(4, 1.0f);
  EXPECT_THROW(dropout_forward(x.data(), x.data(), 1, 4, -0.1f, RngKey{}, 0), std::invalid_argument);
  EXPECT_THROW(dropout_forward(x.data(), x.data(), 1, 4, std::numeric_limits<float>::quiet_NaN(), RngKey{}, 0),
               std::invalid_argument);
}

// The fused dropout + residual against its definition, dropout_forward then the sum (each
// tested above): bit for bit, in place and out of place, over several threads' tasks, a slice
// starting mid-sample and mid-Philox-block, and p = 0 (the plain sum).
TEST(DropoutResidualForward, EqualsDropoutThenTheResidualSum) {
  const RngKey key{.seed = 31, .layer = 2};
  for (auto [rows, per_sample, first_sample, first_element] :
       {std::tuple{kRows, kPerSample, 0ULL, 0ULL}, std::tuple{3, 33L, 5ULL, 7ULL}, std::tuple{1, 1L, 2ULL, 3ULL}}) {
    for (float p : {0.1f, 0.5f, 0.0f}) {
      const std::size_t n = static_cast<std::size_t>(rows) * per_sample;
      const auto x = testing::random_normal<float>(n, 11);
      const auto res = testing::random_normal<float>(n, 12);
      std::vector<float> expected(n);
      dropout_forward(expected.data(), x.data(), rows, per_sample, p, key, first_sample, first_element);
      for (std::size_t i = 0; i < n; ++i) expected[i] += res[i];
      std::vector<float> out(n, std::numeric_limits<float>::quiet_NaN());
      dropout_residual_forward(out.data(), x.data(), res.data(), rows, per_sample, p, key, first_sample, first_element);
      auto in_place = x;
      dropout_residual_forward(in_place.data(), in_place.data(), res.data(), rows, per_sample, p, key, first_sample,
                               first_element);
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(out[i], expected[i]) << "p=" << p << " element " << i;
        ASSERT_EQ(in_place[i], expected[i]) << "in place, p=" << p << " element " << i;
      }
    }
  }
}

TEST(DropoutResidualForward, RejectsProbabilitiesOutsideZeroToOne) {
  std::vector<float> x(4, 1.0f), r(4, 1.0f);
  for (float p : {-0.1f, 1.0f, std::numeric_limits<float>::quiet_NaN()}) {
    EXPECT_THROW(dropout_residual_forward(x.data(), x.data(), r.data(), 1, 4, p, RngKey{}, 0), std::invalid_argument)
        << "p=" << p;
  }
}

}  // namespace
}  // namespace memtrain::kernels
