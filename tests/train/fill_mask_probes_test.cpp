// The fill-mask probes' labels checked against the real KJV train/validation split (the
// reference is data::split_corpus on `bible`'s text, not the probe list itself).
#include "runtime/train/fill_mask.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "runtime/core/errors.hpp"
#include "runtime/data/corpus.hpp"
#include "runtime/data/corpus_split.hpp"
#include "runtime/data/data_config.hpp"

namespace memtrain::train {
namespace {

const std::string kMask = "[MASK]";

std::string with_answer(const FillMaskProbe& probe) {
  std::string text = probe.text;
  text.replace(text.find(kMask), kMask.size(), probe.answer);
  return text;
}

bool some_segment_contains(const data::Corpus& corpus, const std::string& text) {
  return std::any_of(corpus.segments.begin(), corpus.segments.end(),
                     [&](const std::string& s) { return s.find(text) != std::string::npos; });
}

TEST(FillMaskProbes, EachMasksOneWordAndMostAreHeldOut) {
  int held_out = 0;
  for (const auto& probe : fill_mask_probes()) {
    SCOPED_TRACE(probe.reference);
    const auto first = probe.text.find(kMask);
    ASSERT_NE(first, std::string::npos);
    EXPECT_EQ(probe.text.find(kMask, first + 1), std::string::npos);
    EXPECT_FALSE(probe.answer.empty());
    held_out += probe.held_out;
  }
  EXPECT_GE(held_out, 3);
}

TEST(FillMaskProbes, HeldOutLabelsMatchTheDefaultKjvSplit) {
  data::Corpus kjv;
  try {
    kjv = data::read_corpus("kjv");
  } catch (const ConfigError& e) {
    GTEST_SKIP() << "no KJV text on this machine: " << e.what();
  }
  const auto split = data::split_corpus(kjv, data::DataConfig{}.validation_fraction);
  for (const auto& probe : fill_mask_probes()) {
    SCOPED_TRACE(probe.reference);
    const std::string text = with_answer(probe);
    if (probe.held_out) {
      EXPECT_TRUE(some_segment_contains(split.validation, text));
      EXPECT_FALSE(some_segment_contains(split.train, text)) << "training text: " << text;
    } else {
      EXPECT_TRUE(some_segment_contains(split.train, text));
    }
  }
}

TEST(FillMaskProbes, FormatShowsTheLabelAndEachPrediction) {
  FillMaskResult result{
      "Bless the LORD, O my [MASK].", "Psa103:1, held out; answer: soul", {{{"soul", 0.5}, {"God", 0.25}}}};
  EXPECT_EQ(format_fill_mask(result),
            "  Bless the LORD, O my [MASK].  (Psa103:1, held out; answer: soul)\n"
            "      soul 0.500 | God 0.250\n");
}

}  // namespace
}  // namespace memtrain::train
