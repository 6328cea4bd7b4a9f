// Every one of the 2^32 float bit patterns through both f16 conversion paths (F16C and scalar)
// and through bf16, against the IEEE rounding rule checked at its boundaries. Seconds, not
// milliseconds: the unit suite checks a sample (tests/kernels/half_convert_test.cpp).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/half_convert.hpp"

namespace memtrain::kernels {
namespace {

TEST(HalfConvertExhaustive, EveryFloatConvertsToTheSameF16OnBothPaths) {
  if (!detail::f16_uses_f16c()) GTEST_SKIP() << "built without F16C: one path only";
  constexpr std::uint64_t kBlock = 1 << 20;
  std::vector<float> x(kBlock);
  std::vector<std::uint16_t> simd(kBlock), scalar(kBlock);
  for (std::uint64_t base = 0; base < (1ull << 32); base += kBlock) {
    for (std::uint64_t i = 0; i < kBlock; ++i) {
      x[i] = std::bit_cast<float>(static_cast<std::uint32_t>(base + i));
    }
    convert_float_to_half(simd.data(), x.data(), kBlock, HalfFormat::f16);
    detail::convert_float_to_half_scalar(scalar.data(), x.data(), kBlock, HalfFormat::f16);
    if (simd == scalar) continue;  // the common case, without a gtest assertion per element
    for (std::uint64_t i = 0; i < kBlock; ++i) {
      ASSERT_EQ(simd[i], scalar[i]) << std::hex << "float 0x" << base + i;
    }
  }
}

// bf16 keeps the top 16 bits, rounded to nearest even on the low 16: for every float, the
// result is the truncation plus one exactly when the low half is above 0x8000, or equal to it
// with an odd truncation (IEEE round-half-even on the dropped bits). NaNs stay NaN.
TEST(HalfConvertExhaustive, EveryFloatRoundsToNearestEvenBf16) {
  for (std::uint64_t b = 0; b < (1ull << 32); ++b) {
    const auto bits = static_cast<std::uint32_t>(b);
    const float x = std::bit_cast<float>(bits);
    const std::uint16_t h = float_to_bf16(x);
    if (std::isnan(x)) {
      if (!std::isnan(bf16_to_float(h))) FAIL() << "NaN lost: " << std::hex << bits;
      continue;
    }
    const std::uint32_t low = bits & 0xffffu, trunc = bits >> 16;
    const bool up = low > 0x8000u || (low == 0x8000u && (trunc & 1u) != 0);
    const auto want = static_cast<std::uint16_t>(trunc + (up ? 1 : 0));
    if (h != want) FAIL() << std::hex << "float 0x" << bits << ": 0x" << h << " != 0x" << want;
  }
}

}  // namespace
}  // namespace memtrain::kernels
