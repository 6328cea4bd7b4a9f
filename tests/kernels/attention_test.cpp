#include "kernels/cpu/attention.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/threads.hpp"
#include "tests/kernels/test_util.hpp"

namespace memtrain::kernels {
namespace {
using testing::dot;
using testing::max_relative_error;
using testing::numeric_gradient;
using testing::random_normal;

constexpr int B = 2, T = 5, NH = 2, HS = 3, C = NH * HS;

std::vector<double> key_mask() {
  std::vector<double> m(B * T, 1.0);
  m[1 * T + 3] = m[1 * T + 4] = 0.0;  // sample 1 has two padding positions
  return m;
}

// Independent reference: per (b, h, i) the scores, a masked softmax, the dropout mask drawn
// from philox_uniform (the public per-element function), and the weighted sum of V, all in
// plain loops.
std::vector<double> naive_attention(const std::vector<double>& q, const std::vector<double>& k,
                                    const std::vector<double>& v, const std::vector<double>& mask, float p,
                                    const RngKey& key, std::uint64_t first_sample) {
  std::vector<double> out(B * T * C, 0.0);
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
          double pij = mask[b * T + j] != 0 ? std::exp(s[j] - mx) / z : 0;
          if (p > 0) {
            const float u = philox_uniform(key, first_sample + b, (std::uint64_t(h) * T + i) * T + j);
            pij = u >= p ? pij / (1.0 - double(p)) : 0.0;
          }
          for (int e = 0; e < HS; ++e) out[(b * T + i) * C + h * HS + e] += pij * v[(b * T + j) * C + h * HS + e];
        }
      }
    }
  }
  return out;
}

TEST(AttentionForward, MatchesNaiveReferenceWithMaskAndDropout) {
  const auto q = random_normal(B * T * C, 1), k = random_normal(B * T * C, 2), v = random_normal(B * T * C, 3);
  const auto mask = key_mask();
  const RngKey key{.seed = 42, .step = 3, .layer = 1, .site = 0};
  for (const float p : {0.0f, 0.3f}) {
    std::vector<double> out(B * T * C), probs(B * NH * T * T);
    attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), mask.data(), B, T, C, NH, p, key, 10);
    EXPECT_LT(max_relative_error(out, naive_attention(q, k, v, mask, p, key, 10)), 1e-14) << "p = " << p;
    // probs are saved before dropout: rows sum to 1, padding keys get 0
    for (int r = 0; r < B * NH * T; ++r) {
      double s = 0;
      for (int j = 0; j < T; ++j) s += probs[r * T + j];
      EXPECT_NEAR(s, 1.0, 1e-14);
    }
    EXPECT_EQ(probs[(1 * NH * T) * T + 3], 0.0);
  }
}

// The float instantiation agrees with the double one (same dropout mask) to float precision.
TEST(AttentionForward, FloatAgreesWithDouble) {
  const auto q = random_normal(B * T * C, 4), k = random_normal(B * T * C, 5), v = random_normal(B * T * C, 6);
  const auto mask = key_mask();
  const RngKey key{.seed = 1};
  std::vector<double> out(B * T * C), probs(B * NH * T * T);
  attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), mask.data(), B, T, C, NH, 0.2f, key, 0);
  auto qf = testing::cast<float>(q), kf = testing::cast<float>(k), vf = testing::cast<float>(v),
       mf = testing::cast<float>(mask);
  std::vector<float> outf(B * T * C), probsf(B * NH * T * T);
  attention_forward(outf.data(), probsf.data(), qf.data(), kf.data(), vf.data(), mf.data(), B, T, C, NH, 0.2f, key, 0);
  EXPECT_LT(max_relative_error(outf, out), 1e-5);
}

// dq, dk, dv against central finite differences of L = <attention(q, k, v), G>, with padding
// and dropout (the mask is a fixed function of the key, so L is smooth in q, k, v).
TEST(AttentionBackward, MatchesFiniteDifferencesWithMaskAndDropout) {
  auto q = random_normal(B * T * C, 7), k = random_normal(B * T * C, 8), v = random_normal(B * T * C, 9);
  const auto mask = key_mask();
  const auto G = random_normal(B * T * C, 10);
  const RngKey key{.seed = 5, .step = 1, .layer = 2};
  for (const float p : {0.0f, 0.25f}) {
    auto loss = [&] {
      std::vector<double> out(B * T * C), probs(B * NH * T * T);
      attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), mask.data(), B, T, C, NH, p, key, 7);
      return dot(out, G);
    };
    std::vector<double> out(B * T * C), probs(B * NH * T * T), scratch(B * NH * T * T);
    attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), mask.data(), B, T, C, NH, p, key, 7);
    std::vector<double> dq(B * T * C, 0.25), dk(B * T * C, 0.25), dv(B * T * C, 0.25);
    attention_backward(dq.data(), dk.data(), dv.data(), scratch.data(), G.data(), probs.data(), q.data(), k.data(),
                       v.data(), B, T, C, NH, p, key, 7);
    for (auto* g : {&dq, &dk, &dv})
      for (auto& e : *g) e -= 0.25;
    EXPECT_LT(max_relative_error(dq, numeric_gradient(q, loss)), 1e-6) << "p = " << p;
    EXPECT_LT(max_relative_error(dk, numeric_gradient(k, loss)), 1e-6) << "p = " << p;
    EXPECT_LT(max_relative_error(dv, numeric_gradient(v, loss)), 1e-6) << "p = " << p;
  }
}

// Sequences longer than the stack buffer's row block (16384 / T rows) take several blocks.
TEST(AttentionForward, LongSequenceUsesSeveralDropoutBlocks) {
  const int Bl = 1, Tl = 300, NHl = 1, Cl = 4;  // 16384 / 300 = 54 rows per block
  const auto q = random_normal(Tl * Cl, 11), k = random_normal(Tl * Cl, 12), v = random_normal(Tl * Cl, 13);
  const RngKey key{.seed = 9};
  const float p = 0.1f;
  std::vector<double> out(Tl * Cl), probs(Tl * Tl);
  attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), nullptr, Bl, Tl, Cl, NHl, p, key, 0);
  // reference from the saved probabilities and philox_uniform
  std::vector<double> ref(Tl * Cl, 0.0);
  for (int i = 0; i < Tl; ++i)
    for (int j = 0; j < Tl; ++j) {
      const double keep = philox_uniform(key, 0, std::uint64_t(i) * Tl + j) >= p ? 1.0 / (1.0 - double(p)) : 0.0;
      for (int e = 0; e < Cl; ++e) ref[i * Cl + e] += probs[i * Tl + j] * keep * v[j * Cl + e];
    }
  EXPECT_LT(max_relative_error(out, ref), 1e-13);
}

TEST(AttentionForward, RejectsHeadsThatDoNotDivideHiddenSizeAndBadDropout) {
  std::vector<float> buf(64);
  EXPECT_THROW(attention_forward(buf.data(), buf.data(), buf.data(), buf.data(), buf.data(), nullptr, 1, 2, 5, 2, 0.0f,
                                 RngKey{}, 0),
               std::invalid_argument);
  EXPECT_THROW(attention_forward(buf.data(), buf.data(), buf.data(), buf.data(), buf.data(), nullptr, 1, 2, 4, 2, 1.0f,
                                 RngKey{}, 0),
               std::invalid_argument);
  EXPECT_THROW(attention_backward(buf.data(), buf.data(), buf.data(), buf.data(), buf.data(), buf.data(), buf.data(),
                                  buf.data(), buf.data(), 1, 2, 4, 2, -0.5f, RngKey{}, 0),
               std::invalid_argument);
}

// Results do not depend on the thread count (each (b, h) is computed by one thread); the
// sizes are large enough for the parallel path.
TEST(AttentionForward, BitwiseIdenticalAcrossThreadCounts) {
  const int Bp = 2, Tp = 64, NHp = 4, Cp = 64;
  const auto q = random_normal<float>(Bp * Tp * Cp, 14), k = random_normal<float>(Bp * Tp * Cp, 15),
             v = random_normal<float>(Bp * Tp * Cp, 16);
  const RngKey key{.seed = 2};
  const int saved = num_threads();
  std::vector<float> out1(Bp * Tp * Cp), out2(Bp * Tp * Cp), probs(Bp * NHp * Tp * Tp);
  set_num_threads(1);
  attention_forward(out1.data(), probs.data(), q.data(), k.data(), v.data(), nullptr, Bp, Tp, Cp, NHp, 0.1f, key, 0);
  set_num_threads(2);
  attention_forward(out2.data(), probs.data(), q.data(), k.data(), v.data(), nullptr, Bp, Tp, Cp, NHp, 0.1f, key, 0);
  set_num_threads(saved);
  EXPECT_EQ(out1, out2);
}

}  // namespace
}  // namespace memtrain::kernels
