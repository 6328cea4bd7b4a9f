#include "kernels/cpu/matmul.hpp"

#include <gtest/gtest.h>

#include <tuple>

#include "kernels/cpu/threads.hpp"
#include "tests/kernels/test_util.hpp"

namespace memtrain::kernels {
namespace {
using testing::max_relative_error;
using testing::random_normal;

// Independent reference: the textbook triple loop in double, with explicit strides.
std::vector<double> naive_gemm(const std::vector<double>& A, const std::vector<double>& B,
                               const std::vector<double>& C0, int M, int N, int K, bool ta, bool tb, int lda, int ldb,
                               int ldc, double alpha, double beta) {
  std::vector<double> C = C0;
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      double s = 0;
      for (int p = 0; p < K; ++p) {
        const double a = ta ? A[p * lda + i] : A[i * lda + p];
        const double b = tb ? B[j * ldb + p] : B[p * ldb + j];
        s += a * b;
      }
      C[i * ldc + j] = alpha * s + (beta == 0 ? 0 : beta * C0[i * ldc + j]);
    }
  }
  return C;
}

class MatmulTransposes : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

// Every transpose combination, non-square shapes, alpha and beta, in double (to rounding) and
// float (to float rounding of a K = 37 sum).
TEST_P(MatmulTransposes, MatchesNaiveTripleLoop) {
  const auto [ta, tb] = GetParam();
  const int M = 13, N = 29, K = 37;
  const auto A = random_normal(M * K, 1), B = random_normal(K * N, 2), C0 = random_normal(M * N, 3);
  const int lda = ta ? M : K, ldb = tb ? K : N;
  for (const auto& [alpha, beta] : {std::pair{1.0, 0.0}, std::pair{0.5, 1.0}, std::pair{-2.0, 0.25}}) {
    const auto ref = naive_gemm(A, B, C0, M, N, K, ta, tb, lda, ldb, N, alpha, beta);
    std::vector<double> Cd = C0;
    matmul(Cd.data(), A.data(), B.data(), M, N, K, ta, tb, alpha, beta);
    EXPECT_LT(max_relative_error(Cd, ref), 1e-14);
    auto Af = testing::cast<float>(A), Bf = testing::cast<float>(B);
    auto Cf = testing::cast<float>(C0);
    matmul(Cf.data(), Af.data(), Bf.data(), M, N, K, ta, tb, static_cast<float>(alpha), static_cast<float>(beta));
    EXPECT_LT(max_relative_error(Cf, ref), 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(AllCombinations, MatmulTransposes, ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<bool, bool>>& info) {
                           return std::string(std::get<0>(info.param) ? "At" : "A") +
                                  (std::get<1>(info.param) ? "_Bt" : "_B");
                         });

// Large GEMMs are split into slabs over OpenMP threads (along M when M >= N, else along N);
// every slab must land where the triple loop puts it, for every transpose combination.
TEST_P(MatmulTransposes, SplitAcrossThreadsMatchesNaiveTripleLoop) {
  const auto [ta, tb] = GetParam();
  const int saved = num_threads();
  set_num_threads(2);
  for (const auto& [M, N, K] : {std::tuple{203, 120, 100}, std::tuple{100, 231, 97}}) {
    const auto A = random_normal(M * K, 21), B = random_normal(K * N, 22), C0 = random_normal(M * N, 23);
    const int lda = ta ? M : K, ldb = tb ? K : N;
    std::vector<double> Cd = C0;
    matmul(Cd.data(), A.data(), B.data(), M, N, K, ta, tb, 0.75, 0.5);
    EXPECT_LT(max_relative_error(Cd, naive_gemm(A, B, C0, M, N, K, ta, tb, lda, ldb, N, 0.75, 0.5)), 1e-13)
        << M << "x" << N << "x" << K;
  }
  set_num_threads(saved);
}

// beta == 0 must not read C: NaN garbage in the output buffer is overwritten, as with BLAS.
TEST(Matmul, BetaZeroIgnoresGarbageInOutput) {
  const int M = 4, N = 5, K = 3;
  const auto A = random_normal(M * K, 4), B = random_normal(K * N, 5);
  std::vector<double> C(M * N, std::nan(""));
  matmul(C.data(), A.data(), B.data(), M, N, K, false, false);
  const auto ref = naive_gemm(A, B, std::vector<double>(M * N, 0), M, N, K, false, false, K, N, N, 1, 0);
  EXPECT_LT(max_relative_error(C, ref), 1e-14);
}

// The attention layout: heads of an interleaved [B, T, C] tensor addressed through offsets and
// leading dimensions, scores written to [B*NH, T, T]; also batch > 1 through the OpenMP path.
TEST(MatmulStridedBatched, AddressesHeadsInsideInterleavedTensor) {
  const int T = 7, NH = 3, HS = 5, C = NH * HS;
  const auto q = random_normal(T * C, 6), k = random_normal(T * C, 7);
  std::vector<double> scores(NH * T * T, 0);
  // batch over heads: matrix h of q starts at q + h * HS, rows C apart
  matmul_strided_batched(scores.data(), q.data(), k.data(), NH, T, T, HS, false, true, HS, HS, T * T, C, C, T, 0.5,
                         0.0);
  for (int h = 0; h < NH; ++h) {
    for (int i = 0; i < T; ++i) {
      for (int j = 0; j < T; ++j) {
        double s = 0;
        for (int d = 0; d < HS; ++d) s += q[i * C + h * HS + d] * k[j * C + h * HS + d];
        EXPECT_NEAR(scores[(h * T + i) * T + j], 0.5 * s, 1e-13);
      }
    }
  }
}

}  // namespace
}  // namespace memtrain::kernels
