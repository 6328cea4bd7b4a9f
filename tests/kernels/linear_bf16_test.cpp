// kernels::linear_*_bf16 (oneDNN's bf16 matmul) against the definition of torch.nn.Linear in
// double precision, on operands that are bf16 values: the products are exact and only the
// fp32 accumulation (and, for bf16 outputs, one rounding) separates the two.
#include "kernels/cpu/linear_bf16.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/half_convert.hpp"
#include "kernels/cpu/matmul_bf16.hpp"
#include "tests/kernels/test_util.hpp"

namespace memtrain::kernels {
namespace {
using testing::max_relative_error;
using testing::random_normal;

struct Bf16Tensor {
  std::vector<std::uint16_t> bits;
  std::vector<double> values;  // the bf16 values, exactly
};

Bf16Tensor random_bf16(std::size_t n, std::uint64_t seed) {
  Bf16Tensor t;
  for (double x : random_normal(n, seed)) {
    t.bits.push_back(float_to_bf16(static_cast<float>(x)));
    t.values.push_back(bf16_to_float(t.bits.back()));
  }
  return t;
}

// oneDNN runs bf16 matmuls natively with AVX512_BF16 or AMX, emulates them on other AVX-512
// CPUs and refuses them on AVX2 ones (a Zen 3); where it refuses, memtrain never calls it
// (precision.bf16_gemm auto picks the fp32 path, native is refused).
bool runs_here() {
  if (bf16_gemm_native()) return true;
  try {
    std::uint16_t one = 0x3f80;
    float c = 0;
    matmul_bf16(&c, false, &one, &one, nullptr, 1, 1, 1, false, false, false);
    return true;
  } catch (const std::runtime_error&) {
    return false;
  }
}

#define SKIP_UNLESS_BF16_MATMUL_RUNS() \
  if (!runs_here()) GTEST_SKIP() << "oneDNN runs no bf16 matmul on this CPU (" << bf16_gemm_description() << ")"

// Odd sizes as well as the model's multiples of 64 (tails of oneDNN's blocking).
struct Shape {
  int N, C, OC;
};
const Shape kShapes[] = {{1, 1, 1}, {7, 13, 5}, {33, 70, 129}, {128, 96, 200}};

// fp32 accumulation of K products of unit-variance values: relative to the largest output,
// errors of a few 2^-24 times sqrt(K); 1e-5 leaves room for K up to a few hundred.
constexpr double kFp32Tolerance = 1e-5;

TEST(LinearForwardBf16, MatchesDefinitionAtSeveralShapes) {
  SKIP_UNLESS_BF16_MATMUL_RUNS();
  for (const auto& [N, C, OC] : kShapes) {
    SCOPED_TRACE("N=" + std::to_string(N) + " C=" + std::to_string(C) + " OC=" + std::to_string(OC));
    const auto x = random_bf16(std::size_t(N) * C, 1), W = random_bf16(std::size_t(OC) * C, 2);
    const auto b = random_normal<float>(OC, 3);
    std::vector<float> y(std::size_t(N) * OC, std::numeric_limits<float>::quiet_NaN());  // poisoned
    std::vector<float> y_nobias = y;
    linear_forward_bf16(y.data(), x.bits.data(), W.bits.data(), b.data(), N, C, OC);
    linear_forward_bf16(y_nobias.data(), x.bits.data(), W.bits.data(), nullptr, N, C, OC);
    std::vector<double> ref(y.size()), ref_nobias(y.size());
    for (int n = 0; n < N; ++n) {
      for (int o = 0; o < OC; ++o) {
        double s = 0;
        for (int c = 0; c < C; ++c) s += x.values[n * C + c] * W.values[o * C + c];
        ref_nobias[n * OC + o] = s;
        ref[n * OC + o] = s + b[o];
      }
    }
    for (float v : y) ASSERT_TRUE(std::isfinite(v));
    EXPECT_LT(max_relative_error(y, ref), kFp32Tolerance);
    EXPECT_LT(max_relative_error(y_nobias, ref_nobias), kFp32Tolerance);
  }
}

// dinp += dout W, dW (= or +=) dout^T x in f32 and in bf16, db += column sums; started from
// nonzero buffers where they accumulate, so a kernel that overwrote would fail.
TEST(LinearBackwardBf16, MatchesDefinitionAccumulatingAndOverwriting) {
  SKIP_UNLESS_BF16_MATMUL_RUNS();
  for (const auto& [N, C, OC] : kShapes) {
    SCOPED_TRACE("N=" + std::to_string(N) + " C=" + std::to_string(C) + " OC=" + std::to_string(OC));
    const auto x = random_bf16(std::size_t(N) * C, 4), W = random_bf16(std::size_t(OC) * C, 5);
    const auto dy = random_bf16(std::size_t(N) * OC, 6);
    const auto dx0 = random_normal<float>(std::size_t(N) * C, 7);
    const auto dW0 = random_bf16(std::size_t(OC) * C, 8);
    const auto db0 = random_normal<float>(OC, 9);

    std::vector<double> dx_ref(dx0.begin(), dx0.end()), dW_prod(std::size_t(OC) * C, 0.0),
        db_ref(db0.begin(), db0.end());
    for (int n = 0; n < N; ++n) {
      for (int c = 0; c < C; ++c) {
        double s = 0;
        for (int o = 0; o < OC; ++o) s += dy.values[n * OC + o] * W.values[o * C + c];
        dx_ref[n * C + c] += s;
      }
    }
    for (int o = 0; o < OC; ++o) {
      for (int c = 0; c < C; ++c) {
        double s = 0;
        for (int n = 0; n < N; ++n) s += dy.values[n * OC + o] * x.values[n * C + c];
        dW_prod[o * C + c] = s;
      }
      for (int n = 0; n < N; ++n) db_ref[o] += dy.values[n * OC + o];
    }
    std::vector<double> dW_acc_ref(dW_prod.size());
    for (std::size_t i = 0; i < dW_prod.size(); ++i) dW_acc_ref[i] = dW_prod[i] + dW0.values[i];

    // f32 weight gradient (fp32_grad_accumulation), accumulated.
    auto dx = dx0, db = db0;
    std::vector<float> dW32(dW0.values.begin(), dW0.values.end());
    linear_backward_bf16(dx.data(), dW32.data(), /*dweight_bf16=*/false, /*accumulate=*/true, db.data(), dy.bits.data(),
                         x.bits.data(), W.bits.data(), N, C, OC);
    EXPECT_LT(max_relative_error(dx, dx_ref), kFp32Tolerance);
    EXPECT_LT(max_relative_error(dW32, dW_acc_ref), kFp32Tolerance);
    EXPECT_LT(max_relative_error(db, db_ref), kFp32Tolerance);

    // bf16 weight gradient: the fp32 sum rounded once, so within half a bf16 ulp (2^-9
    // relative) of the exact sum, elementwise, plus the fp32 accumulation error.
    auto dW16 = dW0.bits;
    linear_backward_bf16(nullptr, dW16.data(), true, true, nullptr, dy.bits.data(), x.bits.data(), W.bits.data(), N, C,
                         OC);
    std::vector<std::uint16_t> dW16_new(dW0.bits.size(), 0x7fc0);  // poisoned with NaN
    linear_backward_bf16(nullptr, dW16_new.data(), true, /*accumulate=*/false, nullptr, dy.bits.data(), x.bits.data(),
                         W.bits.data(), N, C, OC);
    const double scale_acc = max_relative_error(dW_acc_ref, std::vector<double>(dW_acc_ref.size(), 0.0));
    for (std::size_t i = 0; i < dW16.size(); ++i) {
      const double got = bf16_to_float(dW16[i]), want = dW_acc_ref[i];
      ASSERT_LE(std::abs(got - want), std::ldexp(std::abs(want), -8) + kFp32Tolerance * scale_acc) << i;
      const double got_new = bf16_to_float(dW16_new[i]), want_new = dW_prod[i];
      ASSERT_LE(std::abs(got_new - want_new), std::ldexp(std::abs(want_new), -8) + kFp32Tolerance * scale_acc) << i;
    }
  }
}

// A NaN in an operand reaches the output (the loss scaler's overflow check depends on it).
TEST(LinearForwardBf16, PropagatesNaN) {
  SKIP_UNLESS_BF16_MATMUL_RUNS();
  const int N = 4, C = 16, OC = 8;
  auto x = random_bf16(std::size_t(N) * C, 10);
  const auto W = random_bf16(std::size_t(OC) * C, 11);
  x.bits[2 * C + 3] = 0x7fc0;  // NaN in row 2
  std::vector<float> y(std::size_t(N) * OC);
  linear_forward_bf16(y.data(), x.bits.data(), W.bits.data(), nullptr, N, C, OC);
  for (int o = 0; o < OC; ++o) {
    EXPECT_TRUE(std::isnan(y[2 * OC + o])) << o;
    EXPECT_TRUE(std::isfinite(y[0 * OC + o])) << o;
  }
}

TEST(MatmulBf16, RefusesNonPositiveSizes) {
  std::uint16_t a = 0;
  float c = 0;
  EXPECT_THROW(matmul_bf16(&c, false, &a, &a, nullptr, 0, 1, 1, false, false, false), std::invalid_argument);
}

TEST(MatmulBf16, DescribesTheLibrary) {
  const std::string d = bf16_gemm_description();
  EXPECT_EQ(d.rfind("oneDNN ", 0), 0u) << d;
  EXPECT_EQ(bf16_gemm_native(), d.find("bf16") != std::string::npos || d.find("amx") != std::string::npos) << d;
}

}  // namespace
}  // namespace memtrain::kernels
