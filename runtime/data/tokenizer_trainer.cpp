#include "runtime/data/tokenizer_trainer.hpp"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <regex>
#include <string>
#include <thread>
#include <unordered_map>

#include "runtime/core/errors.hpp"
#include "runtime/data/special_tokens.hpp"

namespace memtrain::data {
namespace {

// Note [Longest training line]
// SentencePiece's max_sentence_length: longer lines are left out of the tokenizer's training
// sample (they are still tokenized). A verse is a few hundred bytes and a text file's paragraph
// a few thousand. It was 65536, but SentencePiece 0.1.97's BPE trainer crashes (SIGSEGV in
// bpe::Trainer::ComputeFreq) on a line of about 35,000 bytes of one repeated character or
// pair; 16384 trained on such lines without trouble (found by a bad-input trial).
constexpr std::size_t kMaxSentenceBytes = 16384;

// Feeds the segments to the trainer from memory (no temporary text file).
class SegmentIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit SegmentIterator(const std::vector<std::string>& sentences) : sentences_(sentences) {}
  bool done() const override { return next_ >= sentences_.size(); }
  void Next() override { ++next_; }
  const std::string& value() const override { return sentences_[next_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& sentences_;
  std::size_t next_ = 0;
};

}  // namespace

int train_tokenizer(const std::vector<std::string>& sentences, const TokenizerSettings& settings,
                    const std::string& model_prefix) {
  if (settings.type != "bpe" && settings.type != "unigram") {
    throw ConfigError("data.tokenizer_type = '" + settings.type + "'; expected bpe or unigram");
  }
  const int minimum = static_cast<int>(kSpecialPieces.size()) + 1;
  if (settings.vocab_size < minimum) {
    throw ConfigError(
        "model.vocab_size = " + std::to_string(settings.vocab_size) +
        " leaves no room for text pieces after the 5 special tokens; expected >= " + std::to_string(minimum));
  }
  // SentencePiece skips lines above max_sentence_length and then fails with its own internal
  // check when none is left: say so in the corpus's terms instead.
  if (!sentences.empty() && std::none_of(sentences.begin(), sentences.end(),
                                         [](const std::string& s) { return s.size() <= kMaxSentenceBytes; })) {
    throw ConfigError("data.corpus: every one of its " + std::to_string(sentences.size()) +
                      " training lines is longer than SentencePiece's " + std::to_string(kMaxSentenceBytes) +
                      "-byte sentence limit; expected text broken into lines (verses, paragraphs)");
  }
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const int threads = settings.num_threads > 0 ? settings.num_threads : static_cast<int>(cores);

  const std::unordered_map<std::string, std::string> args{
      {"model_prefix", model_prefix},
      {"model_type", settings.type},
      {"vocab_size", std::to_string(settings.vocab_size)},
      {"hard_vocab_limit", "false"},
      {"pad_id", std::to_string(kSpecialTokens.pad)},
      {"pad_piece", std::string(kSpecialPieces[kSpecialTokens.pad])},
      {"unk_id", std::to_string(kSpecialTokens.unk)},
      {"unk_piece", std::string(kSpecialPieces[kSpecialTokens.unk])},
      {"bos_id", "-1"},
      {"eos_id", "-1"},
      // User-defined (not control) symbols: the text "[MASK]" then encodes to the mask id,
      // which is how fill-mask prompts are written.
      {"user_defined_symbols", "[CLS],[SEP],[MASK]"},
      // Note [Every character]
      // SentencePiece's default character_coverage (0.9995) drops the rarest characters to
      // [UNK]: in the KJV that is "(" and ")" (221 each in 4.4 MB), so the model would learn
      // [UNK] where the text has parentheses and decode would lose them. A training corpus for
      // this trainer is small and mostly one script, so every character it contains gets a piece;
      // only characters absent from the training split map to [UNK].
      {"character_coverage", "1.0"},
      {"num_threads", std::to_string(threads)},
      {"max_sentence_length", std::to_string(kMaxSentenceBytes)},  // Note [Longest training line]
      {"minloglevel", "2"},
  };
  SegmentIterator iterator(sentences);
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &iterator);
  if (!status.ok()) {
    std::string message = status.error_message();
    const auto reason = message.find("Vocabulary size");
    // "Vocabulary size is smaller than required_chars. 8 vs 23. Increase vocab_size or decrease
    // character_coverage with --character_coverage option.": memtrain has no such option (it
    // trains with character_coverage 1.0), so the numbers are said as memtrain's settings.
    static const std::regex required_chars("Vocabulary size is smaller than required_chars\\. ([0-9]+) vs ([0-9]+)\\.");
    std::smatch m;
    if (std::regex_search(message, m, required_chars)) {
      throw ConfigError("model.vocab_size = " + std::to_string(settings.vocab_size) +
                        " is too small for this corpus: " + "its training text has " + m[2].str() +
                        " distinct characters, and each gets a piece of its own; "
                        "expected model.vocab_size well above " +
                        m[2].str() + " (the special tokens and merges need pieces too)");
    }
    if (reason != std::string::npos) {
      message.erase(0, reason);  // drop SentencePiece's source location and check expression
      throw ConfigError("model.vocab_size = " + std::to_string(settings.vocab_size) +
                        " is too small for this corpus; SentencePiece: " + message);
    }
    throw RuntimeError("SentencePiece training failed: " + status.ToString());
  }
  sentencepiece::SentencePieceProcessor trained;
  const auto loaded = trained.Load(model_prefix + ".model");
  if (!loaded.ok()) {
    throw RuntimeError("cannot load the trained tokenizer " + model_prefix + ".model: " + loaded.ToString());
  }
  return trained.GetPieceSize();
}

}  // namespace memtrain::data
