#include "kernels/philox.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace memtrain::kernels {
namespace {

// Known-answer vectors of Random123's tests/kat_vectors, the three "philox4x32 10" lines
// (columns: counter[4], key[2], expected[4], hex).
TEST(Philox4x32, MatchesRandom123KnownAnswerVectors) {
  struct Kat {
    std::array<std::uint32_t, 4> ctr;
    std::array<std::uint32_t, 2> key;
    std::array<std::uint32_t, 4> expected;
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const auto& k : kats) EXPECT_EQ(philox4x32_10(k.ctr, k.key), k.expected);
}

// philox_uniform is the documented composition (Note [Philox key derivation]) of the
// known-answer-tested block function, recomputed here step by step.
TEST(PhiloxUniform, FollowsDocumentedKeyDerivation) {
  const RngKey key{.seed = 0x123456789abcdefULL, .step = 0x100000002ULL, .layer = 3, .site = 2, .tp_rank = 1};
  const auto k1 = philox4x32_10({0x00000002u, 0x1u, 0, 0}, {0x89abcdefu, 0x01234567u});
  const auto k = philox4x32_10({3, 2, 1, 0x5eedu}, {k1[0], k1[1]});
  const std::uint64_t sample = 0x700000009ULL, element = 4 * 0x500000006ULL + 3;
  const auto r = philox4x32_10({0x6u, 0x5u, 0x9u, 0x7u}, {k[0], k[1]});
  EXPECT_EQ(philox_uniform(key, sample, element), static_cast<float>(r[3] >> 8) / 16777216.0f);
}

// The many-lane blocks are Random123's blocks, word for word, including a run of blocks whose
// counter carries from the low into the high 32-bit word and a sample above 2^32.
TEST(PhiloxStream, ManyBlocksAtOnceAreRandom123sBlocks) {
  const PhiloxStream stream(RngKey{.seed = 42, .step = 7, .layer = 1, .site = 2, .tp_rank = 0});
  const std::uint64_t samples[] = {0, 5, 0x1234567890ULL};
  const std::uint64_t firsts[] = {0, 3, 0xfffffffcULL, 0x7fffffffffffULL};
  for (const std::uint64_t sample : samples) {
    for (const std::uint64_t first : firsts) {
      PhiloxStream::Words words;
      stream.blocks(sample, first, words);
      for (int j = 0; j < PhiloxStream::kLanes; ++j) {
        const auto expected = stream.block(sample, first + static_cast<std::uint64_t>(j));
        for (int w = 0; w < 4; ++w) {
          EXPECT_EQ(words[w][j], expected[w]) << "sample " << sample << " block " << first + j << " word " << w;
        }
      }
    }
  }
}

// Every field of the key, the sample and the element change the stream.
TEST(PhiloxUniform, EveryKeyFieldSelectsAnIndependentStream) {
  const RngKey base{.seed = 1, .step = 2, .layer = 3, .site = 4, .tp_rank = 0};
  auto differs = [&](RngKey other) {
    int same = 0;
    for (std::uint64_t e = 0; e < 64; ++e) same += philox_uniform(base, 5, e) == philox_uniform(other, 5, e);
    return same < 4;
  };
  RngKey k = base;
  k.seed = 2;
  EXPECT_TRUE(differs(k));
  k = base;
  k.step = 3;
  EXPECT_TRUE(differs(k));
  k = base;
  k.layer = 4;
  EXPECT_TRUE(differs(k));
  k = base;
  k.site = 5;
  EXPECT_TRUE(differs(k));
  k = base;
  k.tp_rank = 1;
  EXPECT_TRUE(differs(k));
  // site 65536 and tp_rank 1 do not share bits (no packing collision)
  RngKey a = base, b = base;
  a.site = 65536;
  b.tp_rank = 1;
  b.site = 0;
  int same = 0;
  for (std::uint64_t e = 0; e < 64; ++e) same += philox_uniform(a, 0, e) == philox_uniform(b, 0, e);
  EXPECT_LT(same, 4);
}

// Pearson's chi-square over 64 equal bins of 2^20 draws: 63 degrees of freedom, mean 63,
// standard deviation sqrt(126) = 11.2. The bound 63 + 6 sd = 130 fails a biased generator
// (e.g. one dropping the top bit doubles half the bins: chi2 ~ 1e6) but not a uniform one.
TEST(PhiloxUniform, IsUniformByChiSquare) {
  const RngKey key{.seed = 2024};
  const PhiloxStream stream(key);
  constexpr int kBins = 64;
  constexpr std::int64_t kDraws = 1 << 20;
  std::vector<std::int64_t> counts(kBins, 0);
  double sum = 0;
  stream.for_each_uniform(17, 0, kDraws, [&](std::int64_t, float u) {
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    ++counts[static_cast<int>(u * kBins)];
    sum += u;
  });
  const double expected = double(kDraws) / kBins;
  double chi2 = 0;
  for (const auto c : counts) chi2 += (c - expected) * (c - expected) / expected;
  EXPECT_LT(chi2, 130.0);
  // mean 1/2, standard error sqrt(1/12 / n) = 2.8e-4; 6 standard errors
  EXPECT_NEAR(sum / kDraws, 0.5, 6 * std::sqrt(1.0 / 12 / kDraws));
}

// for_each_uniform (4 values per block) equals element-wise philox_uniform, from any offset.
TEST(PhiloxStream, BlockIterationMatchesElementwise) {
  const RngKey key{.seed = 7, .layer = 1};
  const PhiloxStream stream(key);
  for (std::uint64_t first : {0u, 1u, 3u, 6u}) {
    stream.for_each_uniform(11, first, 13, [&](std::int64_t i, float u) {
      EXPECT_EQ(u, philox_uniform(key, 11, first + i)) << first << " " << i;
    });
  }
}

}  // namespace
}  // namespace memtrain::kernels
