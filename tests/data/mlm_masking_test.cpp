// BERT masking statistics (Devlin et al. 2019, section 3.1: 15% chosen; 80% [MASK], 10% random,
// 10% unchanged) checked with binomial bounds: each count must lie within 4.5 standard
// deviations of n * p (a false failure has probability below 1e-5 per check; a wrong rate of,
// say, 0.14 instead of 0.15 over 125,000 candidates is 9 standard deviations off and fails).
#include <Random123/philox.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "runtime/core/errors.hpp"
#include "runtime/data/mlm_masking.hpp"

namespace memtrain::data {
namespace {

void expect_binomial(std::int64_t count, std::int64_t n, double p, const char* what) {
  const double mean = static_cast<double>(n) * p;
  const double sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
  EXPECT_NEAR(static_cast<double>(count), mean, 4.5 * sd)
      << what << ": " << count << " of " << n << ", expected p = " << p;
}

// Rows [CLS] t1 .. t126 [SEP] of ordinary ids that never equal [MASK]'s id.
std::vector<std::int32_t> row_for(std::uint64_t sample, int vocab_size) {
  std::vector<std::int32_t> row{kSpecialTokens.cls};
  for (int t = 0; t < 126; ++t) {
    row.push_back(kFirstOrdinaryId +
                  static_cast<std::int32_t>((sample * 131 + t * 7) % (vocab_size - kFirstOrdinaryId)));
  }
  row.push_back(kSpecialTokens.sep);
  return row;
}

struct Counts {
  std::int64_t candidates = 0, chosen = 0, masked = 0, random = 0, kept = 0;
};

Counts count(float probability, int vocab_size, std::uint64_t seed, int rows) {
  const MlmMasking masking(probability, vocab_size, seed);
  Counts c;
  for (int i = 0; i < rows; ++i) {
    const auto original = row_for(i, vocab_size);
    auto row = original;
    std::vector<std::int32_t> positions, labels;
    masking.mask(i, row, 0, positions, labels);
    c.candidates += 126;
    c.chosen += static_cast<std::int64_t>(positions.size());
    EXPECT_TRUE(std::is_sorted(positions.begin(), positions.end()));
    std::vector<bool> chosen(row.size(), false);
    for (std::size_t k = 0; k < positions.size(); ++k) {
      const auto t = static_cast<std::size_t>(positions[k]);
      chosen[t] = true;
      EXPECT_EQ(labels[k], original[t]);
      EXPECT_NE(t, 0u);              // never [CLS]
      EXPECT_NE(t, row.size() - 1);  // never [SEP]
      if (row[t] == kSpecialTokens.mask) {
        ++c.masked;
      } else if (row[t] == original[t]) {
        ++c.kept;
      } else {
        ++c.random;
        EXPECT_GE(row[t], kFirstOrdinaryId);
        EXPECT_LT(row[t], vocab_size);
      }
    }
    for (std::size_t t = 0; t < row.size(); ++t) {
      if (!chosen[t]) {
        EXPECT_EQ(row[t], original[t]) << "unchosen position changed";
      }
    }
  }
  return c;
}

TEST(MlmMasking, ChoosesFifteenPercentThenEightyTenTen) {
  constexpr int kVocab = 1000;
  const Counts c = count(0.15f, kVocab, /*seed=*/42, /*rows=*/1000);
  expect_binomial(c.chosen, c.candidates, 0.15, "chosen");
  expect_binomial(c.masked, c.chosen, 0.8, "[MASK]");
  // A random replacement equal to the original counts as kept: p = 0.1 + 0.1 / ordinary ids.
  const double same = 0.1 / (kVocab - kFirstOrdinaryId);
  expect_binomial(c.random, c.chosen, 0.1 - same, "random");
  expect_binomial(c.kept, c.chosen, 0.1 + same, "kept");
}

TEST(MlmMasking, FollowsConfiguredProbability) {
  const Counts c = count(0.3f, 500, /*seed=*/7, /*rows=*/500);
  expect_binomial(c.chosen, c.candidates, 0.3, "chosen at 0.3");
}

TEST(MlmMasking, RandomReplacementIsUniformOverOrdinaryIds) {
  // 20 ordinary ids: the replacement counts over them fit a uniform distribution
  // (19 cells: chi-square with 18 degrees of freedom, below its 0.999 quantile 42.31).
  constexpr int kVocab = kFirstOrdinaryId + 20;
  const MlmMasking masking(1.0f, kVocab, 3);
  std::vector<std::int64_t> histogram(kVocab, 0);
  std::int64_t total = 0;
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::int32_t> row(64, kFirstOrdinaryId);  // all chosen at probability 1
    std::vector<std::int32_t> positions, labels;
    masking.mask(i, row, 0, positions, labels);
    ASSERT_EQ(positions.size(), 64u);
    for (const auto id : row) {
      if (id != kSpecialTokens.mask) ++histogram[id], ++total;
    }
  }
  // Ids equal to the original (kFirstOrdinaryId) also include the 10% kept: count only others.
  const std::int64_t others = total - histogram[kFirstOrdinaryId];
  const double expected = static_cast<double>(others) / 19.0;
  double chi2 = 0;
  for (int id = kFirstOrdinaryId + 1; id < kVocab; ++id) {
    chi2 += (histogram[id] - expected) * (histogram[id] - expected) / expected;
  }
  EXPECT_LT(chi2, 42.31);
  for (int id = 0; id < kFirstOrdinaryId; ++id) EXPECT_EQ(histogram[id], 0) << id;
}

TEST(MlmMasking, EverySequenceGetsAtLeastOneMaskedPosition) {
  const MlmMasking masking(0.15f, 100, 9);
  for (std::uint64_t i = 0; i < 500; ++i) {
    std::vector<std::int32_t> row{kSpecialTokens.cls, 50, 51, kSpecialTokens.sep, kSpecialTokens.pad};
    std::vector<std::int32_t> positions, labels;
    masking.mask(i, row, 10, positions, labels);
    ASSERT_GE(positions.size(), 1u);
    for (const auto p : positions) {
      EXPECT_TRUE(p == 11 || p == 12) << p;  // offset 10 + token position 1 or 2
    }
  }
}

TEST(MlmMasking, DependsOnlyOnSeedAndSample) {
  const MlmMasking a(0.15f, 1000, 1), b(0.15f, 1000, 1), other(0.15f, 1000, 2);
  auto row_a = row_for(5, 1000), row_b = row_for(5, 1000), row_o = row_for(5, 1000);
  std::vector<std::int32_t> pa, la, pb, lb, po, lo;
  b.mask(4, row_b, 0, pb, lb);  // another sample first: no hidden state
  row_b = row_for(5, 1000), pb.clear(), lb.clear();
  a.mask(5, row_a, 0, pa, la);
  b.mask(5, row_b, 0, pb, lb);
  other.mask(5, row_o, 0, po, lo);
  EXPECT_EQ(row_a, row_b);
  EXPECT_EQ(pa, pb);
  EXPECT_NE(pa, po);
}

// Note [Counter-based masking] recomputed position by position with Random123's scalar block
// (counter (sample, t, stream), key = seed): rows longer than one batch of Philox lanes (64), so
// the blocks drawn many at once are checked across their seams, and a sample above 2^32.
TEST(MlmMasking, FollowsDocumentedPhiloxWordsAtEveryPosition) {
  const std::uint64_t seed = 0x0123456789abcdefULL;
  const int vocab_size = 1000;
  const MlmMasking masking(0.25f, vocab_size, seed);
  const auto word = [&](std::uint64_t sample, std::uint32_t t, int w) {
    const r123::Philox4x32::ctr_type ctr = {
        {static_cast<std::uint32_t>(sample), static_cast<std::uint32_t>(sample >> 32), t, kMaskingStream}};
    const r123::Philox4x32::key_type key = {{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
    return r123::Philox4x32()(ctr, key)[w];
  };
  for (const std::uint64_t sample : {std::uint64_t{0}, std::uint64_t{77}, std::uint64_t{0x500000003}}) {
    std::vector<std::int32_t> original{kSpecialTokens.cls};
    for (int t = 0; t < 200; ++t) original.push_back(kFirstOrdinaryId + (t * 37) % 900);
    original.push_back(kSpecialTokens.sep);
    auto row = original;
    std::vector<std::int32_t> positions, labels;
    masking.mask(sample, row, 0, positions, labels);
    std::vector<std::int32_t> expected_positions;
    for (std::uint32_t t = 0; t < original.size(); ++t) {
      auto expected = original[t];
      if (original[t] >= kFirstOrdinaryId && word(sample, t, 0) < 1073741824u) {  // 0.25 * 2^32
        expected_positions.push_back(static_cast<std::int32_t>(t));
        const std::uint32_t action = word(sample, t, 1);
        if (action < 3435973837u) {
          expected = kSpecialTokens.mask;
        } else if (action < 3865470566u) {
          expected =
              kFirstOrdinaryId +
              static_cast<std::int32_t>((std::uint64_t{word(sample, t, 2)} * (vocab_size - kFirstOrdinaryId)) >> 32);
        }
      }
      EXPECT_EQ(row[t], expected) << "sample " << sample << " position " << t;
    }
    EXPECT_EQ(positions, expected_positions) << "sample " << sample;
  }
}

// The many-at-once form is philox_word lane by lane, including b wrapping past 2^32 - 1.
TEST(PhiloxWords, AreThePhiloxWordsOfConsecutiveBlocks) {
  for (const std::uint32_t first_b : {0u, 5u, 0xffffffe0u}) {
    kernels::PhiloxLaneWords words;
    philox_words(99, 0x100000007ULL, first_b, kMockStream, words);
    for (int j = 0; j < kernels::kPhiloxLanes; ++j) {
      for (int w = 0; w < 4; ++w) {
        EXPECT_EQ(words[w][j], philox_word(99, 0x100000007ULL, first_b + static_cast<std::uint32_t>(j), kMockStream, w))
            << "b " << first_b + static_cast<std::uint32_t>(j) << " word " << w;
      }
    }
  }
}

TEST(MlmMasking, RejectsBadSettings) {
  EXPECT_THROW(MlmMasking(0.0f, 100, 1), ConfigError);
  EXPECT_THROW(MlmMasking(1.5f, 100, 1), ConfigError);
  EXPECT_THROW(MlmMasking(0.15f, 5, 1), ConfigError);
}

}  // namespace
}  // namespace memtrain::data
