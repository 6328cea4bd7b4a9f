// kernels/cpu/rows against their definitions written out element by element: each result
// element is one float add of known operands (or a moved value), so the expected values are
// exact; sizes cross the thread team's threshold so the team's split is covered too.
#include "kernels/cpu/rows.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/kernels/test_util.hpp"

namespace memtrain::kernels {
namespace {

using testing::random_normal;

TEST(AddBias, AddsTheBiasToEveryRowOnOneThreadOrATeam) {
  for (const auto& [N, C] : {std::pair<std::int64_t, std::int64_t>{3, 5}, {1031, 769}}) {
    const auto x = random_normal<float>(static_cast<std::size_t>(N * C), 1);
    const auto b = random_normal<float>(static_cast<std::size_t>(C), 2);
    auto out = x;
    add_bias(out.data(), b.data(), N, C);
    for (std::int64_t n = 0; n < N; ++n) {
      for (std::int64_t c = 0; c < C; ++c) {
        ASSERT_EQ(out[n * C + c], x[n * C + c] + b[c]) << n << ", " << c;
      }
    }
  }
}

TEST(AddInplace, AddsElementwiseAcrossChunkEdges) {
  for (const std::int64_t n : {std::int64_t{1}, std::int64_t{16384 + 7}, std::int64_t{(1 << 18) + 13}}) {
    const auto x = random_normal<float>(static_cast<std::size_t>(n), 3);
    const auto y0 = random_normal<float>(static_cast<std::size_t>(n), 4);
    auto y = y0;
    add_inplace(y.data(), x.data(), n);
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], y0[i] + x[i]) << i;
  }
}

TEST(GatherRows, CopiesTheNamedRowsAsStoredAndZeroesNegativeOnes) {
  const std::int64_t C = 7;
  // 16-bit rows, so a row is 14 bytes: moved as bytes, never converted.
  std::vector<std::uint16_t> src(10 * C);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint16_t>(0x3c00 + i);
  const std::vector<std::int32_t> rows = {9, 0, -1, 4};
  std::vector<std::uint16_t> dst(rows.size() * C, 0xffff);
  gather_rows(dst.data(), src.data(), rows.data(), static_cast<std::int64_t>(rows.size()), C * 2);
  for (std::size_t m = 0; m < rows.size(); ++m) {
    for (std::int64_t c = 0; c < C; ++c) {
      const std::uint16_t want = rows[m] < 0 ? 0 : src[rows[m] * C + c];
      EXPECT_EQ(dst[m * C + c], want) << m << ", " << c;
    }
  }
}

TEST(ScatterAddRows, AddsEachSourceRowIntoItsTargetAndSkipsNegativeOnes) {
  const std::int64_t C = 5, N = 6;
  const auto src = random_normal<float>(4 * C, 5);
  const auto dst0 = random_normal<float>(N * C, 6);
  const std::vector<std::int32_t> rows = {1, -1, 3, 5};
  auto dst = dst0;
  scatter_add_rows(dst.data(), src.data(), rows.data(), 4, C);
  for (std::int64_t r = 0; r < N; ++r) {
    int from = -1;
    for (int m = 0; m < 4; ++m) from = rows[m] == r ? m : from;
    for (std::int64_t c = 0; c < C; ++c) {
      const float want = from < 0 ? dst0[r * C + c] : dst0[r * C + c] + src[from * C + c];
      EXPECT_EQ(dst[r * C + c], want) << r << ", " << c;
    }
  }
}

}  // namespace
}  // namespace memtrain::kernels
