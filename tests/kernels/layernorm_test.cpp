#include "kernels/cpu/layernorm.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/threads.hpp"

#include "tests/kernels/test_util.hpp"

namespace memtrain::kernels {
namespace {
using testing::dot;
using testing::max_relative_error;
using testing::numeric_gradient;
using testing::random_normal;

constexpr int N = 5, C = 70;  // C > 64: two column blocks when two threads run

// Ba et al. 2016 eq. 4 looped directly: mean, biased variance, normalize, affine.
TEST(LayerNormForward, MatchesDefinitionAndSavesStatistics) {
  auto x = random_normal(N * C, 1, 3.0);
  for (auto& v : x) v += 5.0;  // an offset makes E[x^2] - E[x]^2 cancellation visible
  const auto gamma = random_normal(C, 2), beta = random_normal(C, 3);
  const double eps = 1e-12;
  std::vector<double> out(N * C), mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), gamma.data(), beta.data(), N, C, eps);
  for (int n = 0; n < N; ++n) {
    double m = 0, var = 0;
    for (int c = 0; c < C; ++c) m += x[n * C + c];
    m /= C;
    for (int c = 0; c < C; ++c) var += (x[n * C + c] - m) * (x[n * C + c] - m);
    var /= C;
    EXPECT_NEAR(mean[n], m, 1e-13);
    EXPECT_NEAR(rstd[n], 1 / std::sqrt(var + eps), 1e-13);
    for (int c = 0; c < C; ++c) {
      EXPECT_NEAR(out[n * C + c], (x[n * C + c] - m) / std::sqrt(var + eps) * gamma[c] + beta[c], 1e-12);
    }
  }
}

// With gamma = 1, beta = 0 every row has mean 0 and (biased) variance var / (var + eps).
TEST(LayerNormForward, FloatRowsAreStandardized) {
  const auto x = random_normal<float>(N * C, 4, 10.0);
  std::vector<float> gamma(C, 1.0f), beta(C, 0.0f), out(N * C), mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), gamma.data(), beta.data(), N, C, 1e-5f);
  for (int n = 0; n < N; ++n) {
    double m = 0, sq = 0;
    for (int c = 0; c < C; ++c) m += out[n * C + c];
    for (int c = 0; c < C; ++c) sq += out[n * C + c] * out[n * C + c];
    EXPECT_NEAR(m / C, 0.0, 1e-6);
    EXPECT_NEAR(sq / C, 1.0, 1e-5);
  }
}

// dx, dgamma, dbeta against central finite differences of L = <layernorm(x), G>.
TEST(LayerNormBackward, MatchesFiniteDifferences) {
  auto x = random_normal(N * C, 5, 2.0), gamma = random_normal(C, 6), beta = random_normal(C, 7);
  const auto G = random_normal(N * C, 8);
  const double eps = 1e-5;
  std::vector<double> mean(N), rstd(N);
  auto loss = [&] {
    std::vector<double> y(N * C);
    layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), gamma.data(), beta.data(), N, C, eps);
    return dot(y, G);
  };
  loss();  // mean, rstd of the unperturbed x
  const auto saved_mean = mean, saved_rstd = rstd;
  std::vector<double> dx(N * C, 0.5), dgamma(C, 0.5), dbeta(C, 0.5);
  layernorm_backward(dx.data(), dgamma.data(), dbeta.data(), G.data(), x.data(), gamma.data(), saved_mean.data(),
                     saved_rstd.data(), N, C);
  for (auto* v : {&dx, &dgamma, &dbeta})
    for (auto& e : *v) e -= 0.5;
  EXPECT_LT(max_relative_error(dx, numeric_gradient(x, loss)), 1e-6);
  EXPECT_LT(max_relative_error(dgamma, numeric_gradient(gamma, loss)), 1e-6);
  EXPECT_LT(max_relative_error(dbeta, numeric_gradient(beta, loss)), 1e-6);
}

// The team path (Note [LayerNorm's parameter sums in the row pass]) on two threads: the first
// thread's 35 rows go as a block of 32 and a short one of 3, the other 35 rows' parameter sums
// in the column pass after them.
TEST(LayerNormBackward, RowBlocksOnTwoThreadsMatchFiniteDifferences) {
  const int saved = num_threads();
  set_num_threads(2);
  constexpr int Nb = 70, Cb = 40;
  auto x = random_normal(Nb * Cb, 15, 2.0), gamma = random_normal(Cb, 16), beta = random_normal(Cb, 17);
  const auto G = random_normal(Nb * Cb, 18);
  std::vector<double> mean(Nb), rstd(Nb);
  auto loss = [&] {
    std::vector<double> y(Nb * Cb);
    layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), gamma.data(), beta.data(), Nb, Cb, 1e-5);
    return dot(y, G);
  };
  loss();
  const auto saved_mean = mean, saved_rstd = rstd;
  std::vector<double> dx(Nb * Cb, 0.5), dgamma(Cb, 0.5), dbeta(Cb, 0.5);
  layernorm_backward(dx.data(), dgamma.data(), dbeta.data(), G.data(), x.data(), gamma.data(), saved_mean.data(),
                     saved_rstd.data(), Nb, Cb);
  for (auto* v : {&dx, &dgamma, &dbeta})
    for (auto& e : *v) e -= 0.5;
  EXPECT_LT(max_relative_error(dx, numeric_gradient(x, loss)), 1e-6);
  EXPECT_LT(max_relative_error(dgamma, numeric_gradient(gamma, loss)), 1e-6);
  EXPECT_LT(max_relative_error(dbeta, numeric_gradient(beta, loss)), 1e-6);
  set_num_threads(saved);
}

// The parameter sums add the rows in row order whatever the thread count, so float results
// are bitwise the same on 1, 2 and 3 threads, with a gradient of only dgamma or only dbeta
// too, and the input gradient's rows likewise.
TEST(LayerNormBackward, FloatSumsDoNotDependOnTheThreadCount) {
  const int saved = num_threads();
  constexpr int Nb = 333, Cb = 768;
  const auto xd = random_normal(Nb * Cb, 25, 2.0), gd = random_normal(Cb, 26), dyd = random_normal(Nb * Cb, 27);
  const std::vector<float> x(xd.begin(), xd.end()), gamma(gd.begin(), gd.end()), dy(dyd.begin(), dyd.end());
  std::vector<float> y(Nb * Cb), mean(Nb), rstd(Nb), beta(Cb, 0.0f);
  layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), gamma.data(), beta.data(), Nb, Cb, 1e-5f);
  struct Grads {
    std::vector<float> dx, dgamma, dbeta, dgamma_only, dbeta_only;
  };
  auto run = [&](int threads) {
    set_num_threads(threads);
    Grads r{std::vector<float>(Nb * Cb, 0.25f), std::vector<float>(Cb, 0.5f), std::vector<float>(Cb, -0.5f),
            std::vector<float>(Cb, 0.5f), std::vector<float>(Cb, -0.5f)};
    layernorm_backward(r.dx.data(), r.dgamma.data(), r.dbeta.data(), dy.data(), x.data(), gamma.data(), mean.data(),
                       rstd.data(), Nb, Cb);
    std::vector<float> dx2(Nb * Cb, 0.0f);
    layernorm_backward(dx2.data(), r.dgamma_only.data(), nullptr, dy.data(), x.data(), gamma.data(), mean.data(),
                       rstd.data(), Nb, Cb);
    layernorm_backward(dx2.data(), nullptr, r.dbeta_only.data(), dy.data(), x.data(), gamma.data(), mean.data(),
                       rstd.data(), Nb, Cb);
    return r;
  };
  const Grads one = run(1);
  EXPECT_EQ(one.dgamma, one.dgamma_only);
  EXPECT_EQ(one.dbeta, one.dbeta_only);
  for (int threads : {2, 3}) {
    const Grads r = run(threads);
    EXPECT_EQ(r.dx, one.dx) << threads << " threads";
    EXPECT_EQ(r.dgamma, one.dgamma) << threads << " threads";
    EXPECT_EQ(r.dbeta, one.dbeta) << threads << " threads";
    EXPECT_EQ(r.dgamma_only, one.dgamma) << threads << " threads";
    EXPECT_EQ(r.dbeta_only, one.dbeta) << threads << " threads";
  }
  set_num_threads(saved);
}

}  // namespace
}  // namespace memtrain::kernels
