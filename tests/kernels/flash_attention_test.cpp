#include "kernels/cpu/flash_attention.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/threads.hpp"
#include "tests/kernels/test_util.hpp"

namespace memtrain::kernels {
namespace {
using testing::dot;
using testing::max_relative_error;
using testing::numeric_gradient;
using testing::random_normal;

struct Shape {
  int B, T, C, NH;
};

// Key masks covering the cases: sample 0 attends everywhere, sample 1 has trailing padding
// (about a third of its keys), sample 2 has every key padded.
template <class Scalar>
std::vector<Scalar> padding_mask(int B, int T) {
  std::vector<Scalar> m(static_cast<std::size_t>(B) * T, Scalar(1));
  if (B > 1) {
    for (int j = T - T / 3; j < T; ++j) m[1 * T + j] = 0;
  }
  if (B > 2) {
    for (int j = 0; j < T; ++j) m[2 * T + j] = 0;
  }
  return m;
}

// Forward and backward outputs of one kernel.
template <class Scalar>
struct Result {
  std::vector<Scalar> out, dq, dk, dv;
};

template <class Scalar>
Result<Scalar> run_standard(const Shape& s, const std::vector<Scalar>& q, const std::vector<Scalar>& k,
                            const std::vector<Scalar>& v, const std::vector<Scalar>& dout, const Scalar* mask, float p,
                            const RngKey& key, std::uint64_t first_sample) {
  const std::size_t n = static_cast<std::size_t>(s.B) * s.T * s.C;
  const std::size_t tt = static_cast<std::size_t>(s.B) * s.NH * s.T * s.T;
  Result<Scalar> r{std::vector<Scalar>(n), std::vector<Scalar>(n, 0), std::vector<Scalar>(n, 0),
                   std::vector<Scalar>(n, 0)};
  std::vector<Scalar> probs(tt), scratch(tt);
  attention_forward(r.out.data(), probs.data(), q.data(), k.data(), v.data(), mask, s.B, s.T, s.C, s.NH, p, key,
                    first_sample);
  attention_backward(r.dq.data(), r.dk.data(), r.dv.data(), scratch.data(), dout.data(), probs.data(), q.data(),
                     k.data(), v.data(), s.B, s.T, s.C, s.NH, p, key, first_sample);
  return r;
}

template <class Scalar>
Result<Scalar> run_flash(const Shape& s, const std::vector<Scalar>& q, const std::vector<Scalar>& k,
                         const std::vector<Scalar>& v, const std::vector<Scalar>& dout, const Scalar* mask, float p,
                         const RngKey& key, std::uint64_t first_sample, std::vector<Scalar>* lse_out = nullptr) {
  const std::size_t n = static_cast<std::size_t>(s.B) * s.T * s.C;
  Result<Scalar> r{std::vector<Scalar>(n), std::vector<Scalar>(n, 0), std::vector<Scalar>(n, 0),
                   std::vector<Scalar>(n, 0)};
  std::vector<Scalar> lse(static_cast<std::size_t>(s.B) * s.NH * s.T);
  std::vector<Scalar> ws(flash_attention_workspace_elements(s.T, s.C, s.NH));
  flash_attention_forward(r.out.data(), lse.data(), q.data(), k.data(), v.data(), mask, s.B, s.T, s.C, s.NH, p, key,
                          first_sample, ws.data());
  flash_attention_backward(r.dq.data(), r.dk.data(), r.dv.data(), dout.data(), r.out.data(), lse.data(), q.data(),
                           k.data(), v.data(), mask, s.B, s.T, s.C, s.NH, p, key, first_sample, ws.data());
  if (lse_out) *lse_out = lse;
  return r;
}

// Runs both kernels on shapes with T below, at, and not a multiple of the 64-wide tile, T = 1,
// one head and several, with and without padding (one sample all padding), dropout 0, 0.1 and
// 0.5, and checks that they agree to `tol` relative to each output's largest entry.
template <class Scalar>
void expect_flash_matches_standard(double tol_out, double tol_grad) {
  const Shape shapes[] = {{2, 1, 8, 2},    {3, 5, 12, 3},   {2, 64, 32, 2},
                          {3, 100, 48, 4}, {1, 130, 16, 1}, {2, 200, 64, 2}};
  const RngKey key{.seed = 11, .step = 4, .layer = 3, .site = 0};
  for (const Shape& s : shapes) {
    const std::size_t n = static_cast<std::size_t>(s.B) * s.T * s.C;
    const auto q = random_normal<Scalar>(n, 1), k = random_normal<Scalar>(n, 2), v = random_normal<Scalar>(n, 3),
               dout = random_normal<Scalar>(n, 4);
    const auto mask = padding_mask<Scalar>(s.B, s.T);
    for (const bool padded : {false, true}) {
      for (const float p : {0.0f, 0.1f, 0.5f}) {
        const Scalar* m = padded ? mask.data() : nullptr;
        const auto ref = run_standard(s, q, k, v, dout, m, p, key, 17);
        const auto got = run_flash(s, q, k, v, dout, m, p, key, 17);
        const auto where = ::testing::Message() << "B=" << s.B << " T=" << s.T << " C=" << s.C << " NH=" << s.NH
                                                << " padded=" << padded << " p=" << p;
        EXPECT_LT(max_relative_error(got.out, ref.out), tol_out) << where;
        EXPECT_LT(max_relative_error(got.dq, ref.dq), tol_grad) << where;
        EXPECT_LT(max_relative_error(got.dk, ref.dk), tol_grad) << where;
        EXPECT_LT(max_relative_error(got.dv, ref.dv), tol_out) << where;
      }
    }
  }
}

// Flash and standard attention compute the same function with the same dropout bits, so they
// agree to rounding: in float (what training runs) ...
TEST(FlashAttention, MatchesStandardKernelInFloat) { expect_flash_matches_standard<float>(2e-6, 2e-5); }

// ... and in double, where a wrong mask bit or a missed rescaling could not hide in rounding.
TEST(FlashAttention, MatchesStandardKernelInDouble) { expect_flash_matches_standard<double>(1e-14, 1e-12); }

// A query whose keys are all padding attends to nothing: zero output, zero gradients and
// lse = -inf (the standard kernel's masked softmax also outputs a zero row).
TEST(FlashAttention, AllPaddingSampleGivesZerosAndNegativeInfiniteLse) {
  const Shape s{3, 70, 8, 2};
  const std::size_t n = static_cast<std::size_t>(s.B) * s.T * s.C;
  const auto q = random_normal(n, 5), k = random_normal(n, 6), v = random_normal(n, 7), dout = random_normal(n, 8);
  const auto mask = padding_mask<double>(s.B, s.T);
  std::vector<double> lse;
  const auto r = run_flash(s, q, k, v, dout, mask.data(), 0.1f, RngKey{.seed = 3}, 0, &lse);
  const std::size_t sample = static_cast<std::size_t>(s.T) * s.C;
  for (std::size_t e = 2 * sample; e < 3 * sample; ++e) {
    ASSERT_EQ(r.out[e], 0.0);
    ASSERT_EQ(r.dq[e], 0.0);
    ASSERT_EQ(r.dk[e], 0.0);
    ASSERT_EQ(r.dv[e], 0.0);
  }
  for (int i = 2 * s.NH * s.T; i < 3 * s.NH * s.T; ++i) {
    EXPECT_EQ(lse[i], -std::numeric_limits<double>::infinity());
  }
}

// lse against log(sum_j exp(s_ij)) over the unpadded keys, computed directly in double from
// the scores (log-sum-exp shifted by the row max), for a shape with several tiles per row.
TEST(FlashAttention, LseEqualsLogSumExpOfScaledMaskedScores) {
  const Shape s{2, 150, 12, 3};
  const int HS = s.C / s.NH;
  const std::size_t n = static_cast<std::size_t>(s.B) * s.T * s.C;
  const auto q = random_normal(n, 9, 2.0), k = random_normal(n, 10, 2.0), v = random_normal(n, 11),
             dout = random_normal(n, 12);
  const auto mask = padding_mask<double>(s.B, s.T);
  std::vector<double> lse;
  run_flash(s, q, k, v, dout, mask.data(), 0.0f, RngKey{}, 0, &lse);
  double worst = 0;
  for (int b = 0; b < s.B; ++b) {
    for (int h = 0; h < s.NH; ++h) {
      for (int i = 0; i < s.T; ++i) {
        std::vector<double> sc;
        for (int j = 0; j < s.T; ++j) {
          if (mask[b * s.T + j] == 0) continue;
          double d = 0;
          for (int e = 0; e < HS; ++e) d += q[(b * s.T + i) * s.C + h * HS + e] * k[(b * s.T + j) * s.C + h * HS + e];
          sc.push_back(d / std::sqrt(double(HS)));
        }
        double mx = -INFINITY, z = 0;
        for (double x : sc) mx = std::max(mx, x);
        for (double x : sc) z += std::exp(x - mx);
        const double expected = mx + std::log(z);
        worst = std::max(worst, std::abs(lse[(b * s.NH + h) * s.T + i] - expected) / std::abs(expected));
      }
    }
  }
  EXPECT_LT(worst, 1e-14);
}

// dq, dk, dv against central finite differences of L = <flash_attention(q, k, v), G> in double
// precision, with padding and dropout (the mask is a fixed function of the key, so L is smooth),
// on a sequence of two tiles (T = 66) so that the online rescaling is differentiated too;
// sample 1's second tile is all padding.
TEST(FlashAttention, BackwardMatchesFiniteDifferences) {
  const Shape s{2, 66, 2, 1};
  const std::size_t n = static_cast<std::size_t>(s.B) * s.T * s.C;
  auto q = random_normal(n, 13), k = random_normal(n, 14), v = random_normal(n, 15);
  const auto G = random_normal(n, 16);
  const auto mask = padding_mask<double>(s.B, s.T);
  const RngKey key{.seed = 5, .step = 1, .layer = 2};
  std::vector<double> ws(flash_attention_workspace_elements(s.T, s.C, s.NH));
  for (const float p : {0.0f, 0.25f}) {
    auto loss = [&] {
      std::vector<double> out(n), lse(s.B * s.NH * s.T);
      flash_attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), mask.data(), s.B, s.T, s.C, s.NH, p,
                              key, 7, ws.data());
      return dot(out, G);
    };
    std::vector<double> out(n), lse(s.B * s.NH * s.T);
    flash_attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), mask.data(), s.B, s.T, s.C, s.NH, p,
                            key, 7, ws.data());
    // start from 0.25 to check that the gradients are accumulated, not overwritten
    std::vector<double> dq(n, 0.25), dk(n, 0.25), dv(n, 0.25);
    flash_attention_backward(dq.data(), dk.data(), dv.data(), G.data(), out.data(), lse.data(), q.data(), k.data(),
                             v.data(), mask.data(), s.B, s.T, s.C, s.NH, p, key, 7, ws.data());
    for (auto* g : {&dq, &dk, &dv})
      for (auto& e : *g) e -= 0.25;
    EXPECT_LT(max_relative_error(dq, numeric_gradient(q, loss)), 1e-6) << "p = " << p;
    EXPECT_LT(max_relative_error(dk, numeric_gradient(k, loss)), 1e-6) << "p = " << p;
    EXPECT_LT(max_relative_error(dv, numeric_gradient(v, loss)), 1e-6) << "p = " << p;
  }
}

// Each (b, h) runs on one thread with its own tiles, so results do not depend on the thread
// count, nor on the workspace's address (a recomputed forward pass must equal the first one
// bitwise); and the kernels stay inside the workspace they were given: a NaN guard after it is
// untouched when the team is as large as flash_attention_workspace_elements assumed.
TEST(FlashAttention, BitwiseIdenticalAcrossThreadCountsAndWorkspaceAddresses) {
  const Shape s{2, 96, 64, 4};
  const std::size_t n = static_cast<std::size_t>(s.B) * s.T * s.C;
  const auto q = random_normal<float>(n, 17), k = random_normal<float>(n, 18), v = random_normal<float>(n, 19),
             dout = random_normal<float>(n, 20);
  const auto mask = padding_mask<float>(s.B, s.T);
  const RngKey key{.seed = 2};
  const int saved = num_threads();
  std::vector<Result<float>> results;
  for (const int threads : {1, 2}) {
    for (const std::size_t shift : {0, 1, 3}) {  // workspace starts 0, 4 or 12 bytes further
      set_num_threads(threads);
      const std::size_t ws_n = flash_attention_workspace_elements(s.T, s.C, s.NH);
      constexpr std::size_t kGuard = 1024;
      std::vector<float> ws(shift + ws_n + kGuard, std::numeric_limits<float>::quiet_NaN());
      Result<float> r{std::vector<float>(n), std::vector<float>(n, 0), std::vector<float>(n, 0),
                      std::vector<float>(n, 0)};
      std::vector<float> lse(s.B * s.NH * s.T);
      flash_attention_forward(r.out.data(), lse.data(), q.data(), k.data(), v.data(), mask.data(), s.B, s.T, s.C, s.NH,
                              0.1f, key, 0, ws.data() + shift);
      flash_attention_backward(r.dq.data(), r.dk.data(), r.dv.data(), dout.data(), r.out.data(), lse.data(), q.data(),
                               k.data(), v.data(), mask.data(), s.B, s.T, s.C, s.NH, 0.1f, key, 0, ws.data() + shift);
      for (std::size_t e = shift + ws_n; e < ws.size(); ++e) ASSERT_TRUE(std::isnan(ws[e])) << e;
      results.push_back(std::move(r));
    }
  }
  set_num_threads(saved);
  for (std::size_t i = 1; i < results.size(); ++i) {
    EXPECT_EQ(results[0].out, results[i].out) << i;
    EXPECT_EQ(results[0].dq, results[i].dq) << i;
    EXPECT_EQ(results[0].dk, results[i].dk) << i;
    EXPECT_EQ(results[0].dv, results[i].dv) << i;
  }
}

// The workspace is per thread and independent of the batch: three tiles and a [T] row each, far
// below the standard kernel's [B, NH, T, T] probabilities.
TEST(FlashAttention, WorkspaceIsPerThreadTilesNotScores) {
  const int saved = num_threads();
  set_num_threads(1);
  // + 16 spare elements for the 64-byte alignment of the start
  EXPECT_EQ(flash_attention_workspace_elements(512, 768, 12), 3u * 64 * 64 + 2 * 64 + 512 + 16);
  EXPECT_EQ(flash_attention_workspace_elements(1, 768, 12), 16u + 16);  // 3+2+1, padded to 16
  set_num_threads(2);
  EXPECT_EQ(flash_attention_workspace_elements(512, 768, 12), 2u * (3 * 64 * 64 + 2 * 64 + 512) + 16);
  set_num_threads(saved);
  EXPECT_THROW(flash_attention_workspace_elements(-1, 768, 12), std::invalid_argument);
}

// Empty batches and sequences are no-ops, not crashes.
TEST(FlashAttention, EmptyBatchOrSequenceDoesNothing) {
  std::vector<float> ws(flash_attention_workspace_elements(0, 8, 2) + 1), buf(8, 1.0f);
  flash_attention_forward(buf.data(), buf.data(), buf.data(), buf.data(), buf.data(), nullptr, 0, 4, 8, 2, 0.1f,
                          RngKey{}, 0, ws.data());
  flash_attention_backward(buf.data(), buf.data(), buf.data(), buf.data(), buf.data(), buf.data(), buf.data(),
                           buf.data(), buf.data(), nullptr, 2, 0, 8, 2, 0.1f, RngKey{}, 0, ws.data());
  EXPECT_EQ(buf, std::vector<float>(8, 1.0f));
}

TEST(FlashAttention, RejectsHeadsThatDoNotDivideHiddenSizeBadSizesAndBadDropout) {
  std::vector<float> buf(64), ws(flash_attention_workspace_elements(2, 4, 2));
  float* x = buf.data();
  EXPECT_THROW(flash_attention_forward(x, x, x, x, x, nullptr, 1, 2, 5, 2, 0.0f, RngKey{}, 0, ws.data()),
               std::invalid_argument);
  EXPECT_THROW(flash_attention_forward(x, x, x, x, x, nullptr, 1, 2, 4, 2, 1.0f, RngKey{}, 0, ws.data()),
               std::invalid_argument);
  EXPECT_THROW(flash_attention_forward(x, x, x, x, x, nullptr, -1, 2, 4, 2, 0.0f, RngKey{}, 0, ws.data()),
               std::invalid_argument);
  EXPECT_THROW(flash_attention_backward(x, x, x, x, x, x, x, x, x, nullptr, 1, 2, 4, 2, -0.5f, RngKey{}, 0, ws.data()),
               std::invalid_argument);
  EXPECT_THROW(flash_attention_backward(x, x, x, x, x, x, x, x, x, nullptr, 1, 2, 4, 0, 0.0f, RngKey{}, 0, ws.data()),
               std::invalid_argument);
}

}  // namespace
}  // namespace memtrain::kernels
