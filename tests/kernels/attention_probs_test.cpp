// kernels::attention_probs, the probabilities-only pass selective recompute runs in backward.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/attention.hpp"
#include "tests/kernels/test_util.hpp"

namespace memtrain::kernels {
namespace {
using testing::random_normal;

// Scores, mask and softmax in plain double loops (independent of the kernel's GEMM path).
std::vector<double> naive_probs(const std::vector<double>& q, const std::vector<double>& k,
                                const std::vector<double>& mask, int B, int T, int C, int NH) {
  const int HS = C / NH;
  std::vector<double> P(static_cast<std::size_t>(B) * NH * T * T, 0.0);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int i = 0; i < T; ++i) {
        std::vector<double> s(T);
        double mx = -INFINITY;
        for (int j = 0; j < T; ++j) {
          double d = 0;
          for (int e = 0; e < HS; ++e) d += q[(b * T + i) * C + h * HS + e] * k[(b * T + j) * C + h * HS + e];
          s[j] = d / std::sqrt(double(HS));
          if (mask[b * T + j] != 0) mx = std::max(mx, s[j]);
        }
        double z = 0;
        for (int j = 0; j < T; ++j) z += mask[b * T + j] != 0 ? std::exp(s[j] - mx) : 0;
        for (int j = 0; j < T; ++j) {
          P[((static_cast<std::size_t>(b) * NH + h) * T + i) * T + j] =
              mask[b * T + j] != 0 ? std::exp(s[j] - mx) / z : 0;
        }
      }
    }
  }
  return P;
}

TEST(AttentionProbs, MatchesScoresMaskAndSoftmaxInDouble) {
  const int B = 2, T = 7, NH = 2, C = 6;
  auto q = random_normal(B * T * C, 1), k = random_normal(B * T * C, 2);
  std::vector<double> mask(B * T, 1.0);
  mask[1 * T + 5] = mask[1 * T + 6] = 0.0;
  std::vector<double> probs(static_cast<std::size_t>(B) * NH * T * T);
  attention_probs(probs.data(), q.data(), k.data(), mask.data(), B, T, C, NH);
  EXPECT_LT(testing::max_relative_error(probs, naive_probs(q, k, mask, B, T, C, NH)), 1e-14);
}

// 64-byte aligned storage, as every tensor from the allocator is: the softmax's vectorised
// sums peel to alignment, so only equally aligned rows are summed in the same order.
struct Aligned {
  explicit Aligned(std::size_t n) : buf(n + 16) {}
  float* data() {
    auto p = reinterpret_cast<std::uintptr_t>(buf.data());
    return reinterpret_cast<float*>((p + 63) / 64 * 64);
  }
  std::vector<float> buf;
};

// Selective recompute relies on this: the rebuilt probabilities are the saved ones bit for
// bit, for a shape big enough to take the kernels' OpenMP path and with padding and dropout
// (dropout must not change what is saved).
TEST(AttentionProbs, BitwiseEqualToWhatTheForwardPassSaves) {
  const int B = 3, T = 40, NH = 4, C = 32;
  auto q = random_normal<float>(B * T * C, 3), k = random_normal<float>(B * T * C, 4),
       v = random_normal<float>(B * T * C, 5);
  std::vector<float> mask(B * T, 1.0f);
  for (int t = 33; t < T; ++t) mask[2 * T + t] = 0.0f;
  const std::size_t n = static_cast<std::size_t>(B) * NH * T * T;
  Aligned saved(n), rebuilt(n);
  std::vector<float> out(B * T * C);
  attention_forward(out.data(), saved.data(), q.data(), k.data(), v.data(), mask.data(), B, T, C, NH, 0.3f,
                    RngKey{7, 1, 2, 0, 0}, 100);
  attention_probs(rebuilt.data(), q.data(), k.data(), mask.data(), B, T, C, NH);
  EXPECT_EQ(std::memcmp(saved.data(), rebuilt.data(), n * sizeof(float)), 0);
}

TEST(AttentionProbs, RejectsHeadsThatDoNotDivideTheHiddenSize) {
  std::vector<float> buf(64);
  EXPECT_THROW(attention_probs(buf.data(), buf.data(), buf.data(), nullptr, 1, 2, 6, 4), std::invalid_argument);
}

}  // namespace
}  // namespace memtrain::kernels
