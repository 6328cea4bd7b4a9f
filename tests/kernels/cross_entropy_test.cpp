#include "kernels/cpu/cross_entropy.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/kernels/test_util.hpp"

namespace memtrain::kernels {
namespace {
using testing::max_relative_error;
using testing::numeric_gradient;
using testing::random_normal;

constexpr int M = 6, V = 11;
const std::vector<std::int32_t> kTargets = {0, 10, 3, 3, 7, 5};

// -log softmax(x)[t] = log(sum_j exp(x_j)) - x_t, summed over rows, in double without any
// max shift (the logits are O(1)).
double naive_loss(const std::vector<double>& x) {
  double loss = 0;
  for (int m = 0; m < M; ++m) {
    double z = 0;
    for (int j = 0; j < V; ++j) z += std::exp(x[m * V + j]);
    loss += std::log(z) - x[m * V + kTargets[m]];
  }
  return loss;
}

TEST(SoftmaxCrossEntropy, LossMatchesLogSumExpAndCountsCorrectArgmax) {
  auto x = random_normal(M * V, 1, 2.0);
  x[0 * V + 0] = 10.0;  // row 0: argmax is the target
  x[1 * V + 10] = 9.0;  // row 1: argmax is the target
  std::int64_t correct_fb = -1, correct_f = -1;
  std::vector<double> d(M * V);
  const double loss_fb =
      softmax_cross_entropy_forward_backward(d.data(), x.data(), kTargets.data(), M, V, 1.0, &correct_fb);
  const double loss_f = softmax_cross_entropy_forward(x.data(), kTargets.data(), M, V, &correct_f);
  EXPECT_NEAR(loss_fb, naive_loss(x), 1e-12);
  EXPECT_NEAR(loss_f, naive_loss(x), 1e-12);
  std::int64_t expected_correct = 0;
  for (int m = 0; m < M; ++m) {
    int arg = 0;
    for (int j = 1; j < V; ++j) arg = x[m * V + j] > x[m * V + arg] ? j : arg;
    expected_correct += arg == kTargets[m];
  }
  EXPECT_GE(expected_correct, 2);
  EXPECT_EQ(correct_fb, expected_correct);
  EXPECT_EQ(correct_f, expected_correct);
}

// Ties count as torch.argmax resolves them: the first maximum wins.
TEST(SoftmaxCrossEntropy, TiedMaximumCountsOnlyTheFirstIndex) {
  std::vector<float> x(2 * V, 0.0f);
  x[3] = x[8] = 5.0f;          // row 0: maxima at 3 and 8
  x[V + 3] = x[V + 8] = 5.0f;  // row 1: the same
  const std::vector<std::int32_t> targets = {3, 8};
  std::int64_t correct = -1;
  softmax_cross_entropy_forward(x.data(), targets.data(), 2, V, &correct);
  EXPECT_EQ(correct, 1);
}

// dlogits against central finite differences of grad_scale * loss(x), computed in place
// (dlogits aliases logits).
TEST(SoftmaxCrossEntropy, GradientMatchesFiniteDifferencesInPlace) {
  auto x = random_normal(M * V, 2);
  const double grad_scale = 1.0 / 37;  // e.g. 37 masked tokens in the global batch
  auto loss = [&] { return grad_scale * naive_loss(x); };
  std::vector<double> d = x;
  softmax_cross_entropy_forward_backward(d.data(), d.data(), kTargets.data(), M, V, grad_scale, nullptr);
  EXPECT_LT(max_relative_error(d, numeric_gradient(x, loss)), 1e-6);
}

// Logits of 1e4 would overflow exp in float; the loss uses the max shift and stays exact.
TEST(SoftmaxCrossEntropy, LargeLogitsStayFinite) {
  auto x = random_normal(M * V, 3);
  auto xf = testing::cast<float>(x);
  for (auto& v : xf) v += 1e4f;
  std::vector<float> d(M * V);
  const double loss = softmax_cross_entropy_forward_backward(d.data(), xf.data(), kTargets.data(), M, V, 1.0f, nullptr);
  ASSERT_TRUE(std::isfinite(loss));
  // softmax is shift invariant: same loss as without the offset, to the float spacing at 1e4
  std::vector<double> shifted(M * V);
  for (int i = 0; i < M * V; ++i) shifted[i] = double(xf[i]) - 1e4;
  EXPECT_NEAR(loss, naive_loss(shifted), 1e-4);
}

TEST(SoftmaxCrossEntropy, RejectsTargetOutsideVocabularyWithoutWriting) {
  const auto x = random_normal<float>(M * V, 4);
  auto targets = kTargets;
  targets[4] = V;
  std::vector<float> d(M * V, 7.0f);
  try {
    softmax_cross_entropy_forward_backward(d.data(), x.data(), targets.data(), M, V, 1.0f, nullptr);
    FAIL() << "expected std::out_of_range";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("targets[4] = 11"), std::string::npos) << e.what();
  }
  EXPECT_EQ(d, std::vector<float>(M * V, 7.0f));
  targets[4] = -1;
  EXPECT_THROW(softmax_cross_entropy_forward(x.data(), targets.data(), M, V, nullptr), std::out_of_range);
}

}  // namespace
}  // namespace memtrain::kernels
