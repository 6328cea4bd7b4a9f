// The full default corpus: the KJV from Debian's bible-kjv, prepared as `memtrain data prepare`
// does with the bert-base vocabulary size. Counts are the published ones: 31,102 verses in 66
// books; BPE reaches 30,522 pieces on it (issue 2).
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "runtime/data/corpus.hpp"
#include "runtime/data/kjv.hpp"
#include "runtime/data/mlm_dataset.hpp"
#include "runtime/data/prepare_data.hpp"
#include "runtime/data/token_file.hpp"
#include "runtime/data/tokenizer.hpp"
#include "tests/data/data_test_support.hpp"

namespace memtrain::data {
namespace {

TEST(KjvCorpus, HasAllVersesWithReferencesStripped) {
  const Corpus corpus = read_corpus("kjv");
  EXPECT_EQ(corpus.segments.size(), 31102u);
  EXPECT_EQ(corpus.num_documents(), 66u);
  EXPECT_EQ(corpus.segments.front(), "In the beginning God created the heaven and the earth.");
  EXPECT_EQ(corpus.segments.back(), "The grace of our Lord Jesus Christ be with you all. Amen.");
  for (const auto& verse : corpus.segments) {
    ASSERT_FALSE(split_verse_reference(verse).has_value()) << verse;
  }
}

TEST(KjvPrepare, BpeReachesTheBertVocabularyAndIsReused) {
  testing::TempDir dir;
  DataConfig config;
  config.corpus = "kjv";
  config.cache_dir = dir.file("cache");
  std::ostringstream log;
  const PreparedData data = prepare_data(config, 30522, log);
  EXPECT_EQ(data.vocab_size, 30522);
  const Tokenizer tokenizer(data.tokenizer_model);
  const auto ids = tokenizer.encode("And God said, Let there be [MASK]");
  EXPECT_EQ(ids.back(), tokenizer.special().mask);
  std::ostringstream again;
  EXPECT_EQ(prepare_data(config, 30522, again).dir, data.dir);
  EXPECT_NE(again.str().find("reusing"), std::string::npos);
  // Every character of the training text has a piece (parentheses included): no [UNK].
  const auto train = read_token_file(data.train_tokens);
  EXPECT_EQ(std::count(train.tokens.begin(), train.tokens.end(), tokenizer.special().unk), 0);
  const MlmDataset valid(data, true, config, 1);
  // About 2% of ~1M tokens in 126-token pieces.
  EXPECT_GT(valid.num_sequences(), 100u);
  EXPECT_LT(valid.num_sequences(), 300u);
}

}  // namespace
}  // namespace memtrain::data
