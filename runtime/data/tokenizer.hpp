#pragma once
// A trained SentencePiece model (Kudo & Richardson 2018), as the trainer and the fill-mask
// predictions use it.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/data/special_tokens.hpp"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace memtrain::data {

class Tokenizer {
 public:
  // Loads a .model file written by train_tokenizer. Throws RuntimeError when it cannot be loaded
  // or its special pieces are not at the fixed ids (Note [Fixed special ids]).
  explicit Tokenizer(const std::string& model_path);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // Text -> piece ids. SentencePiece normalises first (NFKC, whitespace collapsed); the literal
  // text "[MASK]" (also [CLS], [SEP]) becomes its special id, so a fill-mask prompt can be
  // written as plain text.
  std::vector<std::int32_t> encode(std::string_view text) const;
  // Ids -> text; inverse of encode for normalised text. [PAD] ids are skipped.
  std::string decode(const std::vector<std::int32_t>& ids) const;
  // The piece of one id ("▁the", "[MASK]"); throws ConfigError for an id outside the vocabulary.
  std::string id_to_piece(std::int32_t id) const;
  const SpecialTokens& special() const { return special_; }
  int vocab_size() const;

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  SpecialTokens special_ = kSpecialTokens;
};

}  // namespace memtrain::data
