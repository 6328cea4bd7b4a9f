// kernels::linear_*_half_weight (a 16-bit weight converted, and its gradient rounded, whole or a
// block of rows at a time: Notes [Small 16-bit weights convert whole] and [16-bit weights a
// block at a time]) against the definition of torch.nn.Linear in double precision on the
// weight's 16-bit values, at shapes converted whole and shapes with several blocks and a short
// last block, on 1 and 2 threads. The weight gradient is checked
// after its one rounding: within one unit in the last place of the format of the exact sum
// (half of it for the rounding, the rest for fp32 accumulation), plus 1e-5.
#include "kernels/cpu/linear_half_weight.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/linear.hpp"
#include "kernels/cpu/threads.hpp"
#include "tests/kernels/test_util.hpp"

namespace memtrain::kernels {
namespace {
using testing::max_relative_error;
using testing::random_normal;

struct HalfTensor {
  std::vector<std::uint16_t> bits;
  std::vector<double> values;  // the 16-bit values, exactly
};

HalfTensor random_half(std::size_t n, std::uint64_t seed, HalfFormat f) {
  HalfTensor t;
  t.bits.resize(n);
  const auto x = random_normal<float>(n, seed);
  convert_float_to_half(t.bits.data(), x.data(), static_cast<std::int64_t>(n), f);
  std::vector<float> back(n);
  convert_half_to_float(back.data(), t.bits.data(), static_cast<std::int64_t>(n), f);
  t.values.assign(back.begin(), back.end());
  return t;
}

std::vector<double> to_doubles(const std::vector<std::uint16_t>& bits, HalfFormat f) {
  std::vector<float> v(bits.size());
  convert_half_to_float(v.data(), bits.data(), static_cast<std::int64_t>(bits.size()), f);
  return {v.begin(), v.end()};
}

// Relative spacing of the format's values: 2^-10 (f16), 2^-7 (bf16).
double unit_roundoff(HalfFormat f) { return f == HalfFormat::f16 ? 1.0 / 1024 : 1.0 / 128; }

struct Shape {
  int N, C, OC;
};

class LinearHalfWeight : public ::testing::TestWithParam<HalfFormat> {
 protected:
  void TearDown() override { set_num_threads(saved_); }
  int saved_ = num_threads();
};

TEST_P(LinearHalfWeight, MatchesTheDefinitionInDoublePrecision) {
  const HalfFormat f = GetParam();
  std::uint64_t seed = 100;
  // Weights converted whole (Note [Small 16-bit weights convert whole]): odd sizes, several
  // hundred rows. Above 2^22 elements, a block of rows at a time: blocks of 512 with a short
  // last one, and the decoder's skinny shape.
  for (const Shape sh :
       {Shape{5, 7, 3}, Shape{9, 13, 1100}, Shape{33, 64, 2048}, Shape{3, 1030, 4100}, Shape{2, 129, 32600}}) {
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      const int N = sh.N, C = sh.C, OC = sh.OC;
      const std::string where = "N=" + std::to_string(N) + " C=" + std::to_string(C) + " OC=" + std::to_string(OC) +
                                " threads=" + std::to_string(threads) + (f == HalfFormat::f16 ? " f16" : " bf16");
      const auto x = random_normal<float>(std::size_t(N) * C, seed++);
      const auto dy = random_normal<float>(std::size_t(N) * OC, seed++);
      const auto b = random_normal<float>(OC, seed++);
      const HalfTensor w = random_half(std::size_t(OC) * C, seed++, f);
      const HalfTensor g0 = random_half(std::size_t(OC) * C, seed++, f);  // a gradient accumulated into
      std::vector<float> scratch(linear_half_weight_scratch_elements(OC, C));

      // out = x w^T + b
      std::vector<float> out(std::size_t(N) * OC, std::nanf(""));
      linear_forward_half_weight(out.data(), x.data(), w.bits.data(), b.data(), N, C, OC, f, scratch.data());
      std::vector<double> out_ref(out.size());
      for (int n = 0; n < N; ++n) {
        for (int o = 0; o < OC; ++o) {
          double s = b[o];
          for (int c = 0; c < C; ++c) s += double(x[std::size_t(n) * C + c]) * w.values[std::size_t(o) * C + c];
          out_ref[std::size_t(n) * OC + o] = s;
        }
      }
      EXPECT_LT(max_relative_error(out, out_ref), 1e-5) << "out, " << where;

      // dW = dy^T x (written), dW = g0 + dy^T x (accumulated), dinp += dy w, dbias += colsum(dy)
      std::vector<double> dw_ref(std::size_t(OC) * C, 0.0), dx_ref(std::size_t(N) * C, 0.0);
      for (int o = 0; o < OC; ++o) {
        for (int c = 0; c < C; ++c) {
          double s = 0;
          for (int n = 0; n < N; ++n) s += double(dy[std::size_t(n) * OC + o]) * x[std::size_t(n) * C + c];
          dw_ref[std::size_t(o) * C + c] = s;
        }
      }
      const auto dx0 = random_normal<float>(std::size_t(N) * C, seed++);
      for (int n = 0; n < N; ++n) {
        for (int c = 0; c < C; ++c) {
          double s = dx0[std::size_t(n) * C + c];
          for (int o = 0; o < OC; ++o) s += double(dy[std::size_t(n) * OC + o]) * w.values[std::size_t(o) * C + c];
          dx_ref[std::size_t(n) * C + c] = s;
        }
      }
      std::vector<double> db_ref(OC);
      for (int o = 0; o < OC; ++o) {
        db_ref[o] = 0.5;
        for (int n = 0; n < N; ++n) db_ref[o] += dy[std::size_t(n) * OC + o];
      }
      std::vector<std::uint16_t> dw(std::size_t(OC) * C, 0x7e00);  // f16 NaN, bf16 4.25e37: never a gradient here
      std::vector<float> dx = dx0, db(OC, 0.5f);
      linear_backward_half_weight(dx.data(), dw.data(), /*dweight_accumulate=*/false, db.data(), dy.data(), x.data(),
                                  w.bits.data(), N, C, OC, f, scratch.data());
      EXPECT_LT(max_relative_error(dx, dx_ref), 1e-5) << "dinp, " << where;
      EXPECT_LT(max_relative_error(db, db_ref), 1e-5) << "dbias, " << where;
      // One rounding of a sum good to fp32: each element within one unit of its own scale.
      const auto dw_values = to_doubles(dw, f);
      for (std::size_t i = 0; i < dw.size(); ++i) {
        ASSERT_LE(std::abs(dw_values[i] - dw_ref[i]), unit_roundoff(f) * std::abs(dw_ref[i]) + 1e-5)
            << "dweight element " << i << ", " << where;
      }

      std::vector<std::uint16_t> acc = g0.bits;
      linear_backward_half_weight(nullptr, acc.data(), /*dweight_accumulate=*/true, nullptr, dy.data(), x.data(),
                                  w.bits.data(), N, C, OC, f, scratch.data());
      const auto acc_values = to_doubles(acc, f);
      for (std::size_t i = 0; i < acc.size(); ++i) {
        const double exact = g0.values[i] + dw_ref[i];
        ASSERT_LE(std::abs(acc_values[i] - exact), unit_roundoff(f) * std::abs(exact) + 1e-5)
            << "accumulated dweight element " << i << ", " << where;
      }
    }
  }
}

// The scratch linear_half_weight_scratch_elements asks for is all the kernels touch, with a
// guard of NaNs after it: for weights converted whole, and above 2^22 elements at widths where
// the weight block (C = 3072: 256 rows), the input gradient's 1024 rows of a column slab
// (C = 96) or the 512-row cap (C = 24) decides its size.
TEST_P(LinearHalfWeight, StaysInsideTheScratchItAsksFor) {
  const HalfFormat f = GetParam();
  // The decoder's weight on 2 threads: two blocks of scratch, not a float copy of the weight.
  set_num_threads(2);
  EXPECT_EQ(linear_half_weight_scratch_elements(30522, 768), 2u * 1024 * 384);
  // A weight of at most 2^22 elements: the weight itself as floats.
  EXPECT_EQ(linear_half_weight_scratch_elements(3072, 768), 3072u * 768);
  for (const Shape sh : {Shape{8, 3072, 200}, Shape{8, 96, 2500}, Shape{8, 24, 1500}, Shape{2, 3072, 1400},
                         Shape{2, 96, 44000}, Shape{2, 24, 180000}}) {
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      const int N = sh.N, C = sh.C, OC = sh.OC;
      const auto x = random_normal<float>(std::size_t(N) * C, 7);
      const auto dy = random_normal<float>(std::size_t(N) * OC, 8);
      const HalfTensor w = random_half(std::size_t(OC) * C, 9, f);
      const std::size_t need = linear_half_weight_scratch_elements(OC, C);
      constexpr std::size_t kGuard = 4096;
      std::vector<float> scratch(need + kGuard, std::nanf(""));
      std::vector<float> out(std::size_t(N) * OC), dx(std::size_t(N) * C, 0.0f);
      std::vector<std::uint16_t> dw(std::size_t(OC) * C);
      linear_forward_half_weight(out.data(), x.data(), w.bits.data(), nullptr, N, C, OC, f, scratch.data());
      linear_backward_half_weight(dx.data(), dw.data(), false, nullptr, dy.data(), x.data(), w.bits.data(), N, C, OC, f,
                                  scratch.data());
      for (std::size_t i = need; i < scratch.size(); ++i) {
        ASSERT_TRUE(std::isnan(scratch[i])) << "scratch element " << i << " of " << need << " written, C=" << C
                                            << " OC=" << OC << " threads=" << threads;
      }
    }
  }
}

// A weight converted whole goes through linear.hpp's kernels on its float values, so the
// output and input gradient are bitwise what linear.hpp gives on the converted weight, and the
// weight gradient is the rounding of linear.hpp's float gradient.
TEST_P(LinearHalfWeight, SmallWeightsGiveTheBitsOfTheFloatLinear) {
  const HalfFormat f = GetParam();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    const int N = 70, C = 96, OC = 200;
    const auto x = random_normal<float>(std::size_t(N) * C, 21);
    const auto dy = random_normal<float>(std::size_t(N) * OC, 22);
    const auto b = random_normal<float>(OC, 23);
    const HalfTensor w = random_half(std::size_t(OC) * C, 24, f);
    const std::vector<float> wf(w.values.begin(), w.values.end());
    std::vector<float> scratch(linear_half_weight_scratch_elements(OC, C));

    std::vector<float> out(std::size_t(N) * OC), out_ref(out.size());
    linear_forward_half_weight(out.data(), x.data(), w.bits.data(), b.data(), N, C, OC, f, scratch.data());
    linear_forward<float>(out_ref.data(), x.data(), wf.data(), b.data(), N, C, OC);
    EXPECT_EQ(out, out_ref) << "threads=" << threads;

    std::vector<float> dx(std::size_t(N) * C, 0.25f), dx_ref = dx, dw_ref(std::size_t(OC) * C, 0.0f);
    std::vector<std::uint16_t> dw(std::size_t(OC) * C);
    linear_backward_half_weight(dx.data(), dw.data(), false, nullptr, dy.data(), x.data(), w.bits.data(), N, C, OC, f,
                                scratch.data());
    linear_backward<float>(dx_ref.data(), dw_ref.data(), nullptr, dy.data(), x.data(), wf.data(), N, C, OC);
    EXPECT_EQ(dx, dx_ref) << "threads=" << threads;
    std::vector<std::uint16_t> dw_rounded(dw.size());
    convert_float_to_half(dw_rounded.data(), dw_ref.data(), static_cast<std::int64_t>(dw.size()), f);
    EXPECT_EQ(dw, dw_rounded) << "threads=" << threads;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, LinearHalfWeight, ::testing::Values(HalfFormat::f16, HalfFormat::bf16),
                         [](const auto& info) { return info.param == HalfFormat::f16 ? "f16" : "bf16"; });

}  // namespace
}  // namespace memtrain::kernels
