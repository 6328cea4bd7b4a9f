#include "kernels/cpu/gelu.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/kernels/test_util.hpp"

namespace memtrain::kernels {
namespace {
using testing::dot;
using testing::max_relative_error;
using testing::numeric_gradient;
using testing::random_normal;

constexpr int N = 7, C = 300;

double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

// Closed form 0.5 x (1 + erf(x / sqrt 2)) with std::erf, in double; float within a few ulps
// of Eigen's vectorized erf/exp. Inputs span [-9, 9] to reach the saturated tails.
TEST(BiasGeluForward, MatchesErfClosedForm) {
  const auto x = random_normal(N * C, 1, 3.0), bias = random_normal(C, 2);
  std::vector<double> ref(N * C);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) ref[n * C + c] = gelu_ref(x[n * C + c] + bias[c]);
  std::vector<double> out(N * C);
  bias_gelu_forward(out.data(), x.data(), bias.data(), N, C);
  EXPECT_LT(max_relative_error(out, ref), 1e-14);
  auto xf = testing::cast<float>(x), bf = testing::cast<float>(bias);
  std::vector<float> outf(N * C);
  bias_gelu_forward(outf.data(), xf.data(), bf.data(), N, C);
  for (int i = 0; i < N * C; ++i) {
    const double xb = static_cast<double>(xf[i]) + bf[i % C];
    EXPECT_NEAR(outf[i], gelu_ref(xb), 1e-6 * std::max(1.0, std::abs(xb))) << "at " << xb;
  }
  // In place (out aliases inp), no bias.
  std::vector<double> inplace = x;
  bias_gelu_forward(inplace.data(), inplace.data(), nullptr, N, C);
  for (int i = 0; i < N * C; ++i) EXPECT_NEAR(inplace[i], gelu_ref(x[i]), 1e-14 * (1 + std::abs(x[i])));
}

// Known values: gelu(0) = 0, gelu(1) = Phi(1) = 0.8413447460685429, gelu(-1) =
// -0.15865525393145707.
TEST(BiasGeluForward, KnownValues) {
  const std::vector<double> x = {0.0, 1.0, -1.0};
  std::vector<double> out(3);
  bias_gelu_forward(out.data(), x.data(), nullptr, 1, 3);
  EXPECT_DOUBLE_EQ(out[0], 0.0);
  EXPECT_NEAR(out[1], 0.8413447460685429, 1e-15);
  EXPECT_NEAR(out[2], -0.15865525393145707, 1e-15);
}

// dinp and dbias against central finite differences of L = <gelu(x + b), G>: dinp overwritten
// (its old values ignored), dbias accumulated.
TEST(BiasGeluBackward, MatchesFiniteDifferences) {
  auto x = random_normal(N * C, 3, 2.0), bias = random_normal(C, 4);
  const auto G = random_normal(N * C, 5);
  auto loss = [&] {
    std::vector<double> y(N * C);
    bias_gelu_forward(y.data(), x.data(), bias.data(), N, C);
    return dot(y, G);
  };
  std::vector<double> dx(N * C, 1.0), db(C, -1.0);
  bias_gelu_backward(dx.data(), db.data(), G.data(), x.data(), bias.data(), N, C);
  for (auto& v : db) v += 1.0;
  EXPECT_LT(max_relative_error(dx, numeric_gradient(x, loss)), 1e-6);
  EXPECT_LT(max_relative_error(db, numeric_gradient(bias, loss)), 1e-6);
}

// The float backward (Eigen's SIMD erf/exp) agrees with the double one to float precision.
TEST(BiasGeluBackward, FloatAgreesWithDouble) {
  const auto x = random_normal(N * C, 6, 2.0), bias = random_normal(C, 7), G = random_normal(N * C, 8);
  std::vector<double> dx(N * C, 0), db(C, 0);
  bias_gelu_backward(dx.data(), db.data(), G.data(), x.data(), bias.data(), N, C);
  auto xf = testing::cast<float>(x), bf = testing::cast<float>(bias), Gf = testing::cast<float>(G);
  std::vector<float> dxf(N * C, 0), dbf(C, 0);
  bias_gelu_backward(dxf.data(), dbf.data(), Gf.data(), xf.data(), bf.data(), N, C);
  EXPECT_LT(max_relative_error(dxf, dx), 1e-5);
  EXPECT_LT(max_relative_error(dbf, db), 1e-5);
}

// Rows wider than the backward's 2048-element chunks (column blocks of 2304 and 2196 with 2
// threads, one of 4500 with 1: whole and ragged chunks) against the closed-form derivative in double,
// d/dx gelu(x) = 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi), and dbias its column
// sums; float within float precision. Overwrites dinp, accumulates into dbias.
TEST(BiasGeluBackward, WideRowsMatchTheClosedFormDerivative) {
  constexpr int Nw = 3, Cw = 4500;
  const auto x = testing::cast<float>(random_normal(Nw * Cw, 11, 2.0));
  const auto bias = testing::cast<float>(random_normal(Cw, 12));
  const auto G = testing::cast<float>(random_normal(Nw * Cw, 13));
  std::vector<double> dx_ref(Nw * Cw), db_ref(Cw, 0.5);
  for (int n = 0; n < Nw; ++n) {
    for (int c = 0; c < Cw; ++c) {
      const double u = double(x[n * Cw + c]) + double(bias[c]);
      const double d = 0.5 * (1.0 + std::erf(u / std::sqrt(2.0))) + u * std::exp(-0.5 * u * u) / std::sqrt(2.0 * M_PI);
      dx_ref[n * Cw + c] = double(G[n * Cw + c]) * d;
      db_ref[c] += double(G[n * Cw + c]) * d;
    }
  }
  std::vector<float> dx(Nw * Cw, 1.0f), db(Cw, 0.5f);
  bias_gelu_backward(dx.data(), db.data(), G.data(), x.data(), bias.data(), Nw, Cw);
  EXPECT_LT(max_relative_error(dx, dx_ref), 1e-5);
  EXPECT_LT(max_relative_error(db, db_ref), 1e-5);
}

}  // namespace
}  // namespace memtrain::kernels
