#include "kernels/cpu/linear.hpp"

#include <gtest/gtest.h>

#include "tests/kernels/test_util.hpp"

namespace memtrain::kernels {
namespace {
using testing::dot;
using testing::max_relative_error;
using testing::numeric_gradient;
using testing::random_normal;

constexpr int N = 6, C = 5, OC = 4;

// y[n, o] = b[o] + sum_c x[n, c] W[o, c], looped directly (torch.nn.Linear's definition).
TEST(LinearForward, MatchesDefinitionWithAndWithoutBias) {
  const auto x = random_normal(N * C, 1), W = random_normal(OC * C, 2), b = random_normal(OC, 3);
  std::vector<double> y(N * OC), y_nobias(N * OC);
  linear_forward(y.data(), x.data(), W.data(), b.data(), N, C, OC);
  linear_forward(y_nobias.data(), x.data(), W.data(), nullptr, N, C, OC);
  std::vector<double> ref(N * OC), ref_nobias(N * OC);
  for (int n = 0; n < N; ++n) {
    for (int o = 0; o < OC; ++o) {
      double s = 0;
      for (int c = 0; c < C; ++c) s += x[n * C + c] * W[o * C + c];
      ref[n * OC + o] = s + b[o];
      ref_nobias[n * OC + o] = s;
    }
  }
  EXPECT_LT(max_relative_error(y, ref), 1e-14);
  EXPECT_LT(max_relative_error(y_nobias, ref_nobias), 1e-14);
  // float instantiation, same definition
  auto xf = testing::cast<float>(x), Wf = testing::cast<float>(W), bf = testing::cast<float>(b);
  std::vector<float> yf(N * OC);
  linear_forward(yf.data(), xf.data(), Wf.data(), bf.data(), N, C, OC);
  EXPECT_LT(max_relative_error(yf, ref), 1e-6);
}

// Gradients against central finite differences of L = <linear(x, W, b), G>; the kernel
// accumulates, so it starts from nonzero gradient buffers and the start is subtracted.
TEST(LinearBackward, MatchesFiniteDifferencesAndAccumulates) {
  auto x = random_normal(N * C, 4), W = random_normal(OC * C, 5), b = random_normal(OC, 6);
  const auto G = random_normal(N * OC, 7);
  auto loss = [&] {
    std::vector<double> y(N * OC);
    linear_forward(y.data(), x.data(), W.data(), b.data(), N, C, OC);
    return dot(y, G);
  };
  const auto dx0 = random_normal(N * C, 8), dW0 = random_normal(OC * C, 9), db0 = random_normal(OC, 10);
  auto dx = dx0, dW = dW0, db = db0;
  linear_backward(dx.data(), dW.data(), db.data(), G.data(), x.data(), W.data(), N, C, OC);
  for (std::size_t i = 0; i < dx.size(); ++i) dx[i] -= dx0[i];
  for (std::size_t i = 0; i < dW.size(); ++i) dW[i] -= dW0[i];
  for (std::size_t i = 0; i < db.size(); ++i) db[i] -= db0[i];
  EXPECT_LT(max_relative_error(dx, numeric_gradient(x, loss)), 1e-6);
  EXPECT_LT(max_relative_error(dW, numeric_gradient(W, loss)), 1e-6);
  EXPECT_LT(max_relative_error(db, numeric_gradient(b, loss)), 1e-6);
}

TEST(LinearBackward, NullOutputsAreSkipped) {
  const auto x = random_normal(N * C, 11), W = random_normal(OC * C, 12), G = random_normal(N * OC, 13);
  std::vector<double> dW(OC * C, 0), dW_all(OC * C, 0), dx(N * C, 0), db(OC, 0);
  linear_backward(nullptr, dW.data(), nullptr, G.data(), x.data(), W.data(), N, C, OC);
  linear_backward(dx.data(), dW_all.data(), db.data(), G.data(), x.data(), W.data(), N, C, OC);
  EXPECT_EQ(dW, dW_all);
}

}  // namespace
}  // namespace memtrain::kernels
