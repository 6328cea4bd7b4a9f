#include "runtime/train/fill_mask.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/core/context.hpp"
#include "runtime/data/fill_mask_prompt.hpp"
#include "runtime/data/special_tokens.hpp"
#include "runtime/data/tokenizer_trainer.hpp"
#include "runtime/train/model_memory.hpp"
#include "tests/train/temp_dir.hpp"
#include "tests/train/tiny_config.hpp"

namespace memtrain::train {
namespace {

// A tokenizer with far fewer pieces than the model's vocab_size (the QA case: 176 pieces
// against model.vocab_size 30522), and a tiny untrained model over vocab_size 512.
class FillMaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> sentences;
    for (int i = 0; i < 20; ++i) {
      sentences.push_back("and god said let there be light and there was light");
      sentences.push_back("in the beginning god created the heaven and the earth");
    }
    data::TokenizerSettings settings;
    settings.vocab_size = 60;
    settings.num_threads = 1;
    data::train_tokenizer(sentences, settings, tmp_.sub("tok"));
    tokenizer_.emplace(tmp_.sub("tok.model"));
    Config c = testing::tiny_mock_config();
    c.model.vocab_size = 512;
    ctx_.emplace(make_model_allocator(c.memory));
    model_.emplace(c.model, *ctx_);
    model_->init_parameters(7);
    ASSERT_LT(tokenizer_->vocab_size(), c.model.vocab_size);
  }
  testing::TempDir tmp_;
  std::optional<data::Tokenizer> tokenizer_;
  std::optional<core::Context> ctx_;
  std::optional<models::BertForMaskedLM> model_;
};

// The top-5 comes only from ordinary pieces the tokenizer has, and its first entry is the
// maximum of the model's log-probabilities over exactly those ids (computed here directly).
TEST_F(FillMaskTest, TopKComesFromTheTokenizersOrdinaryPiecesOnly) {
  const std::string text = "let there be [MASK]";
  const FillMaskResult r = fill_mask(*model_, *tokenizer_, text, 5, 32);
  ASSERT_EQ(r.masks.size(), 1u);
  ASSERT_EQ(r.masks[0].size(), 5u);

  const auto batch = data::fill_mask_prompt(*tokenizer_, text, 32);
  const auto log_probs = model_->predict_log_probs(batch, batch.masked_positions);  // [1, V]
  double best = -INFINITY;
  std::string best_piece;
  for (int id = data::kFirstOrdinaryId; id < tokenizer_->vocab_size(); ++id) {
    if (log_probs[id] > best) {
      best = log_probs[id];
      best_piece = tokenizer_->id_to_piece(id);
    }
  }
  best_piece.erase(0, best_piece.rfind("\xE2\x96\x81") == 0 ? 3 : 0);
  EXPECT_EQ(r.masks[0][0].token, best_piece);
  EXPECT_NEAR(r.masks[0][0].probability, std::exp(best), 1e-6);
  for (std::size_t i = 1; i < r.masks[0].size(); ++i) {
    EXPECT_LE(r.masks[0][i].probability, r.masks[0][i - 1].probability);
  }
  for (const auto& t : r.masks[0]) {
    for (const auto special : data::kSpecialPieces) EXPECT_NE(t.token, special);
  }
}

// A probe longer than max_positions is skipped with a one-line note; the others still print.
TEST_F(FillMaskTest, ProbeLongerThanMaxPositionsIsSkippedNotFatal) {
  const std::vector<FillMaskProbe> probes = {
      {"Ge1:1",
       "in the beginning god created the heaven and the [MASK] and god said let there "
       "be light and there was light",
       "earth", false},
      {"Ge1:3", "let there be [MASK]", "light", false},
  };
  std::string text;
  ASSERT_NO_THROW(text = format_fill_mask_probes(*model_, *tokenizer_, probes, 5, 8));
  EXPECT_NE(text.find("  skipped Ge1:1: fill-mask prompt"), std::string::npos) << text;
  EXPECT_NE(text.find("expected at most 8"), std::string::npos) << text;
  EXPECT_NE(text.find("  let there be [MASK]  (Ge1:3, training text; answer: light)\n"), std::string::npos) << text;
}

// Issue 48, section 6: trained on another corpus, a KJV verse is neither training text nor held
// out of it.
TEST_F(FillMaskTest, ProbesOfARunOnAnotherCorpusAreNotLabelledByTheKjvSplit) {
  const std::vector<FillMaskProbe> probes = {{"Ge1:3", "let there be [MASK]", "light", false},
                                             {"Ge1:4", "god saw the [MASK]", "light", true}};
  const std::string text = format_fill_mask_probes(*model_, *tokenizer_, probes, 5, 8, /*trained_on_kjv=*/false);
  EXPECT_NE(text.find("(Ge1:3, a KJV verse (not from this run's corpus); answer: light)"), std::string::npos) << text;
  EXPECT_NE(text.find("(Ge1:4, a KJV verse (not from this run's corpus); answer: light)"), std::string::npos) << text;
  EXPECT_EQ(text.find("training text"), std::string::npos) << text;
  EXPECT_EQ(text.find("held out"), std::string::npos) << text;
}

}  // namespace
}  // namespace memtrain::train
