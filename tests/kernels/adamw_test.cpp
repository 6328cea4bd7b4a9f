#include "kernels/cpu/adamw.hpp"
#include "kernels/cpu/half_convert.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/kernels/test_util.hpp"

namespace memtrain::kernels {
namespace {
using testing::max_relative_error;
using testing::random_normal;

// Loshchilov & Hutter 2019, Algorithm 2 (with torch's placement of lr on the decay), written
// out with bias-corrected moments m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t).
TEST(AdamwUpdate, MatchesAlgorithmOverSeveralSteps) {
  const int n = 1000;
  const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
  auto p = random_normal(n, 1), p_ref = p;
  std::vector<double> m(n, 0), v(n, 0), m_ref(n, 0), v_ref(n, 0);
  for (int t = 1; t <= 5; ++t) {
    const auto g = random_normal(n, 100 + t);
    adamw_update(p.data(), g.data(), m.data(), v.data(), n, lr, b1, b2, eps, wd, t);
    for (int i = 0; i < n; ++i) {
      p_ref[i] -= lr * wd * p_ref[i];
      m_ref[i] = b1 * m_ref[i] + (1 - b1) * g[i];
      v_ref[i] = b2 * v_ref[i] + (1 - b2) * g[i] * g[i];
      const double m_hat = m_ref[i] / (1 - std::pow(b1, t)), v_hat = v_ref[i] / (1 - std::pow(b2, t));
      p_ref[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
  }
  EXPECT_LT(max_relative_error(p, p_ref), 1e-14);
  EXPECT_LT(max_relative_error(m, m_ref), 1e-14);
  EXPECT_LT(max_relative_error(v, v_ref), 1e-14);
}

// Closed form of the first step without decay: m_hat = g, v_hat = g^2, so the update is
// -lr * g / (|g| + eps), i.e. -lr * sign(g) for |g| >> eps (Adam's scale invariance).
TEST(AdamwUpdate, FirstStepMovesEachParameterByLrTimesSign) {
  std::vector<float> p = {1.0f, 1.0f, 1.0f}, g = {3.0f, -0.02f, 1e4f}, m(3, 0), v(3, 0);
  adamw_update(p.data(), g.data(), m.data(), v.data(), 3, 0.01f, 0.9f, 0.999f, 1e-8f, 0.0f, 1);
  EXPECT_NEAR(p[0], 0.99f, 1e-6);
  EXPECT_NEAR(p[1], 1.01f, 1e-6);
  EXPECT_NEAR(p[2], 0.99f, 1e-6);
}

// Decoupled weight decay with a zero gradient: p <- p (1 - lr wd), moments stay 0.
TEST(AdamwUpdate, WeightDecayIsDecoupledFromGradient) {
  std::vector<double> p = {2.0, -4.0}, g = {0.0, 0.0}, m(2, 0), v(2, 0);
  adamw_update(p.data(), g.data(), m.data(), v.data(), 2, 0.1, 0.9, 0.999, 1e-8, 0.5, 1);
  EXPECT_DOUBLE_EQ(p[0], 2.0 * (1 - 0.05));
  EXPECT_DOUBLE_EQ(p[1], -4.0 * (1 - 0.05));
}

// The clip factor read with the gradient (grad_scale) gives the bits of the two-pass form it
// replaces, torch.nn.utils.clip_grad_norm_'s in-place scaling (scale_inplace) then the update,
// with odd factors whose products round; and the gradient itself is left unscaled.
TEST(AdamwUpdate, GradScaleEqualsScalingTheGradientInPlaceFirst) {
  const int n = 100003;  // several chunks and a ragged tail
  for (const float scale : {1.0f, 0.3337f, 1.0f / 65536.0f, 7.77e-3f}) {
    std::vector<float> p(n), g(n), m(n), v(n);
    for (int i = 0; i < n; ++i) {
      p[i] = std::sin(0.37f * static_cast<float>(i));
      g[i] = 1e-2f * std::cos(1.13f * static_cast<float>(i)) + 1e-9f * static_cast<float>(i % 7);
      m[i] = 1e-3f * std::sin(0.71f * static_cast<float>(i));
      v[i] = 1e-6f * (1.0f + std::cos(0.19f * static_cast<float>(i)));
    }
    auto p2 = p, g2 = g, m2 = m, v2 = v;
    const auto g_before = g;
    adamw_update(p.data(), g.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 3, scale);
    scale_inplace(g2.data(), n, scale);
    adamw_update(p2.data(), g2.data(), m2.data(), v2.data(), n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 3);
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(p[i], p2[i]) << "scale " << scale << " element " << i;
      ASSERT_EQ(m[i], m2[i]) << "scale " << scale << " element " << i;
      ASSERT_EQ(v[i], v2[i]) << "scale " << scale << " element " << i;
    }
    EXPECT_EQ(g, g_before);
  }
}

// A one-pass 16-bit form (adamw_update_bf16 / _f16) against the three passes it replaces,
// composed from the separately tested pieces: the gradient converted (convert_half_to_float),
// adamw_update<float> with the scale, the master rounded (convert_float_to_half). Bit for bit,
// over several threads' chunks, blocks and a ragged tail, with values that round both ways, a
// zero gradient, gradients in f16's subnormal range and a master past f16's largest finite
// value (its f16 copy rounds to inf, as convert_float_to_half does; bf16 keeps it finite).
template <class OnePass>
void expect_one_pass_equals_convert_update_round(HalfFormat f, OnePass one_pass) {
  const std::int64_t n = 70001;
  std::vector<float> master(n), m(n), v(n), g(n);
  for (std::int64_t i = 0; i < n; ++i) {
    const float x = static_cast<float>(i);
    master[i] = std::sin(0.37f * x) * 3.0f;
    m[i] = 1e-3f * std::cos(0.11f * x);
    v[i] = 1e-6f * (1.5f + std::sin(0.23f * x));
    g[i] = i % 97 == 0 ? 0.0f : (i % 5 == 0 ? 3e-6f : 1e-2f) * std::cos(1.7f * x);
  }
  master[12345] = 70000.0f;
  std::vector<std::uint16_t> grad(n), value(n), value_ref(n);
  convert_float_to_half(grad.data(), g.data(), n, f);
  auto master_ref = master, m_ref = m, v_ref = v;
  one_pass(master.data(), value.data(), grad.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 4,
           0.37f);
  std::vector<float> g_ref(n);
  convert_half_to_float(g_ref.data(), grad.data(), n, f);
  adamw_update(master_ref.data(), g_ref.data(), m_ref.data(), v_ref.data(), n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 4,
               0.37f);
  convert_float_to_half(value_ref.data(), master_ref.data(), n, f);
  EXPECT_EQ(master, master_ref);
  EXPECT_EQ(m, m_ref);
  EXPECT_EQ(v, v_ref);
  EXPECT_EQ(value, value_ref);
  if (f == HalfFormat::f16) {
    EXPECT_EQ(value[12345], 0x7c00u);  // +inf
  }
  EXPECT_THROW(one_pass(master.data(), value.data(), grad.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.999f, 1e-8f,
                        0.01f, 0, 1.0f),
               std::invalid_argument);
}

TEST(AdamwUpdate, TheBf16FormEqualsConvertUpdateRound) {
  expect_one_pass_equals_convert_update_round(HalfFormat::bf16, adamw_update_bf16);
}

TEST(AdamwUpdate, TheF16FormEqualsConvertUpdateRound) {
  expect_one_pass_equals_convert_update_round(HalfFormat::f16, adamw_update_f16);
}

TEST(AdamwUpdate, RejectsStepZero) {
  std::vector<float> p(1), g(1), m(1), v(1);
  EXPECT_THROW(adamw_update(p.data(), g.data(), m.data(), v.data(), 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, 0),
               std::invalid_argument);
}

// Global-norm clipping pieces: sum of squares accumulates in double (a float running sum of
// 2^20 ones would still be exact, so use 0.1, whose float sum drifts), scale multiplies.
// 1-bit Adam's frozen-variance step (Tang et al. 2021, Algorithm 1), written out in double with
// the freeze step's bias correction; an element with v = 0 keeps its value and gets m = 0.
TEST(AdamFrozenVarianceUpdate, UsesTheFrozenVarianceAndLeavesZeroVarianceAlone) {
  const int n = 100;
  const double lr = 1e-3, b1 = 0.9, b2 = 0.98, eps = 1e-8, wd = 0.01;
  auto p = random_normal(n, 3), m = random_normal(n, 4), v = random_normal(n, 5);
  for (auto& x : v) x = x * x;
  v[7] = 0.0;
  const auto p0 = p, m0 = m;
  adam_frozen_variance_update(p.data(), m.data(), v.data(), n, lr, b1, b2, eps, wd, 12, 10);
  for (int i = 0; i < n; ++i) {
    if (i == 7) {
      EXPECT_EQ(p[i], p0[i]);
      EXPECT_EQ(m[i], 0.0);
      continue;
    }
    const double want = p0[i] * (1 - lr * wd) -
                        lr * (m0[i] / (1 - std::pow(b1, 12))) / (std::sqrt(v[i] / (1 - std::pow(b2, 10))) + eps);
    EXPECT_NEAR(p[i], want, 1e-12 * std::abs(want) + 1e-15) << i;
    EXPECT_EQ(m[i], m0[i]);
  }
  EXPECT_THROW(adam_frozen_variance_update(p.data(), m.data(), v.data(), n, lr, b1, b2, eps, wd, 1, 0),
               std::invalid_argument);
}

TEST(GradClip, SumOfSquaresAccumulatesInDoubleAndScaleMultiplies) {
  const std::int64_t n = 1 << 20;
  std::vector<float> x(n, 0.1f);
  const double expected = double(n) * double(0.1f) * double(0.1f);
  EXPECT_NEAR(sum_of_squares(x.data(), n), expected, 1e-9 * expected);
  scale_inplace(x.data(), n, 0.5f);
  EXPECT_EQ(x[0], 0.05f);
  EXPECT_EQ(x[n - 1], 0.05f);
}

// Note [Sixteen partial sums]: every element counted once, through whole chunks, the 16-wide
// partial sums and a ragged tail, against a long double sum of the same squares.
TEST(SumOfSquares, CountsEveryElementOfARaggedLength) {
  for (const std::int64_t n : {1, 15, 17, 32768 + 5, 3 * 32768 + 31}) {
    std::vector<float> x(static_cast<std::size_t>(n));
    long double expected = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      x[static_cast<std::size_t>(i)] = std::sin(0.1f * static_cast<float>(i)) * (1.0f + static_cast<float>(i % 13));
      expected += static_cast<long double>(x[static_cast<std::size_t>(i)]) * x[static_cast<std::size_t>(i)];
    }
    EXPECT_NEAR(sum_of_squares(x.data(), n), static_cast<double>(expected), 1e-12 * static_cast<double>(expected))
        << "n = " << n;
  }
}

// 16-bit gradients: every element read in its format and counted once, through whole 4096
// chunks, a ragged tail and the thread team (n > 8 chunks), against a long double sum of the
// same values decoded by the scalar conversion.
TEST(SumOfSquares, SixteenBitStorageCountsEveryElementAsItsFloatValue) {
  for (HalfFormat f : {HalfFormat::f16, HalfFormat::bf16}) {
    for (const std::int64_t n : {1, 17, 4096 + 3, 9 * 4096 + 77}) {
      std::vector<float> x(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) {
        x[static_cast<std::size_t>(i)] = std::cos(0.37f * static_cast<float>(i)) * (1.0f + static_cast<float>(i % 7));
      }
      std::vector<std::uint16_t> h(x.size());
      detail::convert_float_to_half_scalar(h.data(), x.data(), n, f);
      std::vector<float> back(x.size());
      detail::convert_half_to_float_scalar(back.data(), h.data(), n, f);
      long double expected = 0;
      for (const float e : back) expected += static_cast<long double>(e) * e;
      EXPECT_NEAR(sum_of_squares_half(h.data(), n, f), static_cast<double>(expected),
                  1e-12 * static_cast<double>(expected))
          << "n = " << n;
    }
  }
}

}  // namespace
}  // namespace memtrain::kernels
