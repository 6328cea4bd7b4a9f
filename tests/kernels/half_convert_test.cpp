// fp16 / bf16 conversions against numpy and torch (tests/fixtures/make_half_fixtures.py), the
// IEEE 754 binary16 definition (closed-form value of every bit pattern, nearest-even rounding
// as a search over neighbours), and the F16C path against the scalar path bit for bit.
#include "kernels/cpu/half_convert.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/cpu/threads.hpp"

namespace memtrain::kernels {
namespace {

float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }
std::uint32_t bits_of(float x) { return std::bit_cast<std::uint32_t>(x); }

// Value of a binary16 pattern from its definition (IEEE 754-2008 section 3.4), in double:
// (-1)^s * 2^(e-15) * (1 + m/1024) for 1 <= e <= 30, (-1)^s * 2^-14 * (m/1024) for e = 0.
double f16_value_by_definition(std::uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double sign = s != 0 ? -1.0 : 1.0;
  if (e == 0x1f) return m == 0 ? sign * INFINITY : NAN;
  if (e == 0) return sign * std::ldexp(m / 1024.0, -14);
  return sign * std::ldexp(1.0 + m / 1024.0, e - 15);
}

// Value of a bfloat16 pattern: the float whose top 16 bits it is, evaluated from binary32's
// definition (-1)^s * 2^(e-127) * (1 + m/128) (e = 0: 2^-126 * m/128).
double bf16_value_by_definition(std::uint16_t h) {
  const int s = h >> 15, e = (h >> 7) & 0xff, m = h & 0x7f;
  const double sign = s != 0 ? -1.0 : 1.0;
  if (e == 0xff) return m == 0 ? sign * INFINITY : NAN;
  if (e == 0) return sign * std::ldexp(m / 128.0, -126);
  return sign * std::ldexp(1.0 + m / 128.0, e - 127);
}

struct Case {
  std::string name;
  std::uint32_t float_bits;
  std::uint16_t f16_bits, bf16_bits;
  bool f16_is_nan, bf16_is_nan;
};

std::vector<Case> load_fixture() {
  const std::string path = MEMTRAIN_SOURCE_DIR "/tests/fixtures/half_conversion_cases.json";
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot open " << path;
  const auto doc = nlohmann::json::parse(in);
  std::vector<Case> cases;
  for (const auto& c : doc.at("cases")) {
    cases.push_back({c.at("name"), c.at("float_bits"), c.at("f16_bits"), c.at("bf16_bits"), c.at("f16_is_nan"),
                     c.at("bf16_is_nan")});
  }
  return cases;
}

// All float bit patterns 0, step, 2 step, ... below 2^32: a spread sample of every exponent.
std::vector<float> strided_floats(std::uint32_t step) {
  std::vector<float> v;
  for (std::uint64_t b = 0; b <= 0xffffffffull; b += step) v.push_back(from_bits(b));
  return v;
}

TEST(HalfConvert, FloatToF16MatchesNumpy) {
  const auto cases = load_fixture();
  ASSERT_GT(cases.size(), 400u);
  for (const auto& c : cases) {
    const std::uint16_t h = float_to_f16(from_bits(c.float_bits));
    if (c.f16_is_nan) {
      EXPECT_TRUE(std::isnan(f16_to_float(h))) << c.name;
    } else {
      EXPECT_EQ(h, c.f16_bits) << c.name << std::hex << " float 0x" << c.float_bits;
    }
  }
}

TEST(HalfConvert, FloatToBf16MatchesTorch) {
  for (const auto& c : load_fixture()) {
    const std::uint16_t h = float_to_bf16(from_bits(c.float_bits));
    if (c.bf16_is_nan) {
      EXPECT_TRUE(std::isnan(bf16_to_float(h))) << c.name;
    } else {
      EXPECT_EQ(h, c.bf16_bits) << c.name << std::hex << " float 0x" << c.float_bits;
    }
  }
}

// The bit patterns of IEEE 754 binary16's landmarks.
TEST(HalfConvert, F16LandmarksHaveTheirIeeeBitPatterns) {
  EXPECT_EQ(float_to_f16(0.0f), 0x0000);
  EXPECT_EQ(float_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -24)), 0x0001);         // smallest subnormal
  EXPECT_EQ(float_to_f16(1023 * std::ldexp(1.0f, -24)), 0x03ff);  // largest subnormal
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -14)), 0x0400);         // smallest normal
  EXPECT_EQ(float_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_f16(65504.0f), 0x7bff);  // largest finite
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);  // ties up past it: inf
  EXPECT_EQ(float_to_f16(-INFINITY), 0xfc00);
  EXPECT_EQ(f16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(bits_of(f16_to_float(0x8000)), 0x80000000u);
  EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(NAN))));
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
  EXPECT_EQ(bf16_to_float(0x7f7f), from_bits(0x7f7f0000u));             // bf16 max
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
}

// Every f16 and bf16 pattern: to float is exactly its defined value, and back to the same bits.
TEST(HalfConvert, EveryHalfPatternRoundTripsExactly) {
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    const float f = f16_to_float(h);
    const double want = f16_value_by_definition(h);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << b;
      ASSERT_TRUE(std::isnan(f16_to_float(float_to_f16(f)))) << std::hex << b;
    } else {
      ASSERT_EQ(static_cast<double>(f), want) << std::hex << b;
      ASSERT_EQ(std::signbit(f), (b & 0x8000) != 0) << std::hex << b;
      ASSERT_EQ(float_to_f16(f), h) << std::hex << b;
    }
    const float g = bf16_to_float(h);
    const double want_bf = bf16_value_by_definition(h);
    if (std::isnan(want_bf)) {
      ASSERT_TRUE(std::isnan(g)) << std::hex << b;
      ASSERT_TRUE(std::isnan(bf16_to_float(float_to_bf16(g)))) << std::hex << b;
    } else {
      ASSERT_EQ(static_cast<double>(g), want_bf) << std::hex << b;
      ASSERT_EQ(float_to_bf16(g), h) << std::hex << b;
    }
  }
}

// Round to nearest, ties to even, by search: the result must be the finite f16 closest to x
// (or, at a tie, the one with an even fraction), or inf when |x| >= 65520 = 65504 + ulp/2.
TEST(HalfConvert, FloatToF16IsNearestEvenOnASampleOfAllFloats) {
  for (const float x : strided_floats(4099)) {
    if (std::isnan(x)) continue;
    const std::uint16_t h = float_to_f16(x);
    const double ax = std::abs(static_cast<double>(x));
    ASSERT_EQ((h & 0x8000) != 0, std::signbit(x)) << x;
    if (ax >= 65520.0) {
      ASSERT_EQ(h & 0x7fff, 0x7c00) << x;
      continue;
    }
    const int mag = h & 0x7fff;
    ASSERT_LT(mag, 0x7c00) << x;
    const double got = f16_value_by_definition(static_cast<std::uint16_t>(mag));
    const double err = std::abs(got - ax);
    const double below = mag > 0 ? f16_value_by_definition(static_cast<std::uint16_t>(mag - 1)) : -1;
    const double above = f16_value_by_definition(static_cast<std::uint16_t>(mag + 1));
    const double err_below = mag > 0 ? std::abs(ax - below) : INFINITY;
    const double err_above = mag + 1 < 0x7c00 ? std::abs(above - ax) : INFINITY;
    ASSERT_LE(err, err_below) << x;
    ASSERT_LE(err, err_above) << x;
    if (err == err_below || err == err_above) {
      ASSERT_EQ(mag & 1, 0) << "tie not even: " << x;
    }
  }
}

// The same search for bf16: nearest representable, ties to the even fraction.
TEST(HalfConvert, FloatToBf16IsNearestEvenOnASampleOfAllFloats) {
  for (const float x : strided_floats(4099)) {
    if (std::isnan(x) || std::isinf(x)) continue;
    const std::uint16_t h = float_to_bf16(x);
    const int mag = h & 0x7fff;
    const double ax = std::abs(static_cast<double>(x));
    ASSERT_EQ((h & 0x8000) != 0, std::signbit(x)) << x;
    // Past max + ulp/2 (= 2^128 - 2^119) the nearest-even result is inf.
    if (ax >= std::ldexp(1.0, 128) - std::ldexp(1.0, 119)) {
      ASSERT_EQ(mag, 0x7f80) << x;
      continue;
    }
    const double got = bf16_value_by_definition(static_cast<std::uint16_t>(mag));
    const double err = std::abs(got - ax);
    const double err_below = mag > 0 ? ax - bf16_value_by_definition(static_cast<std::uint16_t>(mag - 1)) : INFINITY;
    const double err_above =
        mag + 1 < 0x7f80 ? bf16_value_by_definition(static_cast<std::uint16_t>(mag + 1)) - ax : INFINITY;
    ASSERT_LE(err, err_below) << x;
    ASSERT_LE(err, err_above) << x;
    if (err == err_below || err == err_above) {
      ASSERT_EQ(mag & 1, 0) << "tie not even: " << x;
    }
  }
}

// The bulk f16 path (F16C when built with it) against the scalar path: every one of the 65536
// halves to float, and floats to half around every f16 rounding boundary and on a sample of
// all floats. Odd lengths exercise the scalar tail after the 8-wide loop.
TEST(HalfConvert, BulkF16PathMatchesScalarPathBitwise) {
  if (!detail::f16_uses_f16c()) GTEST_SKIP() << "built without F16C: one path only";
  std::vector<std::uint16_t> halves(65536 + 3);
  for (std::size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<std::uint16_t>(i);
  std::vector<float> simd(halves.size()), scalar(halves.size());
  convert_half_to_float(simd.data(), halves.data(), std::ssize(halves), HalfFormat::f16);
  detail::convert_half_to_float_scalar(scalar.data(), halves.data(), std::ssize(halves), HalfFormat::f16);
  for (std::size_t i = 0; i < halves.size(); ++i) {
    ASSERT_EQ(bits_of(simd[i]), bits_of(scalar[i])) << std::hex << "half 0x" << halves[i];
  }
  // Every float whose low 13 bits are near the rounding point (0x1000) or at 0/0x1fff, for
  // every exponent and sign and for 64 fraction prefixes each; plus the strided sample.
  std::vector<float> floats = strided_floats(65521);
  for (std::uint32_t hi = 0; hi < (1u << 9); ++hi) {               // sign + exponent
    for (std::uint32_t frac = 0; frac < (1u << 10); frac += 17) {  // top 10 fraction bits
      for (const std::uint32_t low : {0x0u, 0x1u, 0xfffu, 0x1000u, 0x1001u, 0x1fffu}) {
        floats.push_back(from_bits((hi << 23) | (frac << 13) | low));
      }
    }
  }
  std::vector<std::uint16_t> a(floats.size()), b(floats.size());
  convert_float_to_half(a.data(), floats.data(), std::ssize(floats), HalfFormat::f16);
  detail::convert_float_to_half_scalar(b.data(), floats.data(), std::ssize(floats), HalfFormat::f16);
  for (std::size_t i = 0; i < floats.size(); ++i) {
    ASSERT_EQ(a[i], b[i]) << std::hex << "float 0x" << bits_of(floats[i]);
  }
}

// Large inputs run on a thread team in chunks; the result must not depend on it.
TEST(HalfConvert, ThreadedBulkConversionEqualsElementwise) {
  const int saved = num_threads();
  set_num_threads(2);
  const std::vector<float> x = strided_floats(1021);  // ~4.2 M elements, not a chunk multiple
  std::vector<std::uint16_t> h(x.size());
  std::vector<float> back(x.size());
  for (const HalfFormat f : {HalfFormat::f16, HalfFormat::bf16}) {
    convert_float_to_half(h.data(), x.data(), std::ssize(x), f);
    convert_half_to_float(back.data(), h.data(), std::ssize(h), f);
    for (std::size_t i = 0; i < x.size(); i += 1) {
      const std::uint16_t want = f == HalfFormat::f16 ? float_to_f16(x[i]) : float_to_bf16(x[i]);
      ASSERT_EQ(h[i], want) << i;
      const float want_back = f == HalfFormat::f16 ? f16_to_float(want) : bf16_to_float(want);
      ASSERT_EQ(bits_of(back[i]), bits_of(want_back)) << i;
    }
  }
  set_num_threads(saved);
}

// round_float_to_half (Note [Views rounded in place]) must leave in x exactly what the two
// portable scalar conversions give, and store the same 16 bits: on ~4.2 M strided floats (every
// exponent, subnormals, infinities and NaNs among them), odd-length and on a thread team.
TEST(HalfConvert, RoundingInPlaceEqualsConvertingThereAndBack) {
  const int saved = num_threads();
  set_num_threads(2);
  const std::vector<float> x = strided_floats(1021);
  for (const HalfFormat f : {HalfFormat::f16, HalfFormat::bf16}) {
    std::vector<std::uint16_t> want(x.size()), got(x.size());
    std::vector<float> want_back(x.size());
    detail::convert_float_to_half_scalar(want.data(), x.data(), std::ssize(x), f);
    detail::convert_half_to_float_scalar(want_back.data(), want.data(), std::ssize(want), f);
    std::vector<float> rounded = x;
    round_float_to_half(got.data(), rounded.data(), std::ssize(rounded), f);
    for (std::size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(got[i], want[i]) << std::hex << "float 0x" << bits_of(x[i]);
      ASSERT_EQ(bits_of(rounded[i]), bits_of(want_back[i])) << std::hex << "float 0x" << bits_of(x[i]);
    }
  }
  set_num_threads(saved);
}

TEST(HalfConvert, AllFiniteFindsASingleInfOrNanAnywhere) {
  const int saved = num_threads();
  set_num_threads(2);
  for (const std::int64_t n : {std::int64_t{1}, std::int64_t{37}, std::int64_t{1} << 20}) {
    std::vector<float> x(n, 1.5f);
    std::vector<std::uint16_t> f16(n, float_to_f16(65504.0f)), bf16(n, float_to_bf16(3e38f));
    EXPECT_TRUE(all_finite(x.data(), n));
    EXPECT_TRUE(all_finite(f16.data(), n, HalfFormat::f16));
    EXPECT_TRUE(all_finite(bf16.data(), n, HalfFormat::bf16));
    for (const std::int64_t at : {std::int64_t{0}, n / 2, n - 1}) {
      for (const float bad : {INFINITY, -INFINITY, NAN}) {
        x[at] = bad;
        EXPECT_FALSE(all_finite(x.data(), n)) << "n " << n << " at " << at;
        x[at] = 1.5f;
        f16[at] = float_to_f16(bad);
        EXPECT_FALSE(all_finite(f16.data(), n, HalfFormat::f16)) << "n " << n << " at " << at;
        f16[at] = 0;
        bf16[at] = float_to_bf16(bad);
        EXPECT_FALSE(all_finite(bf16.data(), n, HalfFormat::bf16)) << "n " << n << " at " << at;
        bf16[at] = 0;
      }
    }
    // A value finite in float but past f16's range overflows only when converted.
    x[n / 2] = 70000.0f;
    EXPECT_TRUE(all_finite(x.data(), n));
    convert_float_to_half(f16.data(), x.data(), n, HalfFormat::f16);
    EXPECT_FALSE(all_finite(f16.data(), n, HalfFormat::f16));
  }
  EXPECT_TRUE(all_finite(static_cast<const float*>(nullptr), 0));
  set_num_threads(saved);
}

}  // namespace
}  // namespace memtrain::kernels
