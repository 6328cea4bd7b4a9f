// The train/validation split: deterministic, disjoint, covering, and shaped as Note
// [Held-out ranges] states (counts computed here from its closed form).
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/core/errors.hpp"
#include "runtime/data/corpus_split.hpp"

namespace memtrain::data {
namespace {

Corpus numbered_corpus(std::size_t segments, std::size_t per_document) {
  Corpus corpus;
  corpus.source = "numbered";
  for (std::size_t i = 0; i < segments; ++i) {
    if (i % per_document == 0) corpus.document_starts.push_back(i);
    corpus.segments.push_back("segment " + std::to_string(i));
  }
  return corpus;
}

std::size_t index_of(const std::string& segment) { return std::stoul(segment.substr(8)); }

TEST(SplitCorpus, DisjointCoveringAndInCorpusOrder) {
  const Corpus corpus = numbered_corpus(5000, 37);
  const CorpusSplit split = split_corpus(corpus, 0.05);
  std::vector<int> seen(corpus.segments.size(), 0);
  for (const auto* part : {&split.train, &split.validation}) {
    for (std::size_t i = 0; i < part->segments.size(); ++i) {
      ++seen[index_of(part->segments[i])];
      if (i > 0) {
        EXPECT_LT(index_of(part->segments[i - 1]), index_of(part->segments[i]));
      }
    }
  }
  for (std::size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "segment " << i;
  // v = round(5000 * 0.05) = 250 held out, in ceil(250 / 100) = 3 contiguous ranges.
  EXPECT_EQ(split.validation.segments.size(), 250u);
  ASSERT_EQ(split.validation_ranges.size(), 3u);
  for (const auto& segment : split.validation.segments) {
    const std::size_t i = index_of(segment);
    int inside = 0;
    for (const auto& [begin, end] : split.validation_ranges) inside += begin <= i && i < end;
    EXPECT_EQ(inside, 1) << "validation segment " << i;
  }
}

TEST(SplitCorpus, IsDeterministic) {
  const Corpus corpus = numbered_corpus(1234, 10);
  const CorpusSplit a = split_corpus(corpus, 0.02);
  const CorpusSplit b = split_corpus(corpus, 0.02);
  EXPECT_EQ(a.validation_ranges, b.validation_ranges);
  EXPECT_EQ(a.train.segments, b.train.segments);
  EXPECT_EQ(a.validation.document_starts, b.validation.document_starts);
}

// The KJV's shape: 31,102 verses at the default 2% -> 622 verses in 7 ranges spread over the
// whole text (one in each seventh).
TEST(SplitCorpus, KjvSizedCorpusHoldsOutSevenSpreadRanges) {
  const Corpus corpus = numbered_corpus(31102, 1000);
  const CorpusSplit split = split_corpus(corpus, 0.02);
  ASSERT_EQ(split.validation_ranges.size(), 7u);
  std::size_t total = 0;
  for (std::size_t j = 0; j < 7; ++j) {
    const auto [begin, end] = split.validation_ranges[j];
    total += end - begin;
    EXPECT_GE(begin, j * 31102 / 7);
    EXPECT_LE(end, (j + 1) * 31102 / 7);
  }
  EXPECT_EQ(total, 622u);
}

TEST(SplitCorpus, RangeCuttingADocumentMakesTwoDocuments) {
  // One document of 100 segments, 10% held out: one range of 10 in the middle (45..54), so the
  // training split has two documents (before and after) and validation one.
  const Corpus corpus = numbered_corpus(100, 100);
  const CorpusSplit split = split_corpus(corpus, 0.1);
  ASSERT_EQ(split.validation_ranges.size(), 1u);
  EXPECT_EQ(split.validation_ranges[0], (std::pair<std::size_t, std::size_t>{45, 55}));
  EXPECT_EQ(split.train.document_starts, (std::vector<std::size_t>{0, 45}));
  EXPECT_EQ(split.validation.document_starts, (std::vector<std::size_t>{0}));
}

TEST(SplitCorpus, RejectsBadFractionAndTinyCorpus) {
  const Corpus corpus = numbered_corpus(10, 5);
  EXPECT_THROW(split_corpus(corpus, 0.0), ConfigError);
  EXPECT_THROW(split_corpus(corpus, 0.6), ConfigError);
  EXPECT_THROW(split_corpus(corpus, std::nan("")), ConfigError);
  EXPECT_THROW(split_corpus(numbered_corpus(1, 1), 0.5), ConfigError);
  // Two segments: one each.
  const CorpusSplit split = split_corpus(numbered_corpus(2, 2), 0.01);
  EXPECT_EQ(split.train.segments.size(), 1u);
  EXPECT_EQ(split.validation.segments.size(), 1u);
}

}  // namespace
}  // namespace memtrain::data
