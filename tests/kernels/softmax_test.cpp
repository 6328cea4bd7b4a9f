#include "kernels/cpu/softmax.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/kernels/test_util.hpp"

namespace memtrain::kernels {
namespace {
using testing::dot;
using testing::max_relative_error;
using testing::numeric_gradient;
using testing::random_normal;

constexpr int rows = 6, cols = 9, rows_per_mask = 3;  // two masks, three rows each

// Key mask [2, cols]: mask 0 hides keys 2 and 7, mask 1 hides every key.
std::vector<double> make_mask() {
  std::vector<double> m(2 * cols, 1.0);
  m[2] = m[7] = 0.0;
  for (int j = 0; j < cols; ++j) m[cols + j] = 0.0;
  return m;
}

// Reference: exp(scale x_j) / sum over unmasked keys of exp(scale x_k), in double, no shift.
TEST(MaskedSoftmaxForward, MatchesDefinitionAndZeroesMaskedKeys) {
  const auto x = random_normal(rows * cols, 1, 2.0);
  const auto mask = make_mask();
  const double scale = 0.7;
  std::vector<double> out(rows * cols);
  masked_softmax_forward(out.data(), x.data(), mask.data(), rows, cols, rows_per_mask, scale);
  for (int r = 0; r < rows; ++r) {
    const double* m = &mask[(r / rows_per_mask) * cols];
    double z = 0;
    for (int j = 0; j < cols; ++j) z += m[j] != 0 ? std::exp(scale * x[r * cols + j]) : 0.0;
    for (int j = 0; j < cols; ++j) {
      const double ref = (m[j] != 0 && z > 0) ? std::exp(scale * x[r * cols + j]) / z : 0.0;
      EXPECT_NEAR(out[r * cols + j], ref, 1e-15);
      if (m[j] == 0) {
        EXPECT_EQ(out[r * cols + j], 0.0);  // exactly, not a tiny exp(-inf)
      }
    }
  }
}

// Large logits (1e4) overflow a naive exp; the max-shifted kernel must stay finite and exact,
// in float too. Softmax is shift invariant: subtracting 1e4 gives the reference.
TEST(MaskedSoftmaxForward, LargeLogitsDoNotOverflow) {
  auto x = random_normal<float>(cols, 2);
  std::vector<float> big(cols);
  for (int j = 0; j < cols; ++j) big[j] = x[j] + 1e4f;
  std::vector<float> out(cols), ref(cols);
  masked_softmax_forward(out.data(), big.data(), nullptr, 1, cols, 1, 1.0f);
  masked_softmax_forward(ref.data(), x.data(), nullptr, 1, cols, 1, 1.0f);
  for (int j = 0; j < cols; ++j) {
    ASSERT_TRUE(std::isfinite(out[j]));
    EXPECT_NEAR(out[j], ref[j], 1e-3);  // 1e4 + x rounds x to float spacing 1e-3 at 1e4
  }
}

// dinp against central finite differences of L = <softmax(scale * x), G>, masked keys
// included (their gradient is 0), and an all-masked row (gradient 0).
TEST(MaskedSoftmaxBackward, MatchesFiniteDifferences) {
  auto x = random_normal(rows * cols, 3);
  const auto mask = make_mask();
  const auto G = random_normal(rows * cols, 4);
  const double scale = 1.3;
  auto loss = [&] {
    std::vector<double> y(rows * cols);
    masked_softmax_forward(y.data(), x.data(), mask.data(), rows, cols, rows_per_mask, scale);
    return dot(y, G);
  };
  std::vector<double> probs(rows * cols);
  masked_softmax_forward(probs.data(), x.data(), mask.data(), rows, cols, rows_per_mask, scale);
  std::vector<double> dx = G;  // in place: dinp aliases dout
  masked_softmax_backward(dx.data(), dx.data(), probs.data(), rows, cols, scale);
  EXPECT_LT(max_relative_error(dx, numeric_gradient(x, loss)), 1e-6);
}

}  // namespace
}  // namespace memtrain::kernels
