#include "runtime/data/tokenizer.hpp"

#include <sentencepiece_processor.h>

#include "runtime/core/errors.hpp"

namespace memtrain::data {

Tokenizer::Tokenizer(const std::string& model_path)
    : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  const auto status = processor_->Load(model_path);
  if (!status.ok()) {
    throw RuntimeError("cannot load tokenizer model " + model_path + ": " + status.ToString());
  }
  for (std::size_t id = 0; id < kSpecialPieces.size(); ++id) {
    const std::string piece = processor_->IdToPiece(static_cast<int>(id));
    if (piece != kSpecialPieces[id]) {
      throw RuntimeError("tokenizer model " + model_path + " has piece '" + piece + "' at id " + std::to_string(id) +
                         ", expected " + std::string(kSpecialPieces[id]));
    }
  }
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

std::vector<std::int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  const auto status = processor_->Encode(text, &ids);
  if (!status.ok()) throw RuntimeError("tokenizer: cannot encode text: " + status.ToString());
  return {ids.begin(), ids.end()};
}

std::string Tokenizer::decode(const std::vector<std::int32_t>& ids) const {
  std::vector<int> kept;
  kept.reserve(ids.size());
  for (const auto id : ids) {
    if (id < 0 || id >= vocab_size()) {
      throw ConfigError("tokenizer: id " + std::to_string(id) + " outside the vocabulary [0, " +
                        std::to_string(vocab_size()) + ")");
    }
    if (id != special_.pad) kept.push_back(id);
  }
  std::string text;
  const auto status = processor_->Decode(kept, &text);
  if (!status.ok()) throw RuntimeError("tokenizer: cannot decode ids: " + status.ToString());
  return text;
}

std::string Tokenizer::id_to_piece(std::int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw ConfigError("tokenizer: id " + std::to_string(id) + " outside the vocabulary [0, " +
                      std::to_string(vocab_size()) + ")");
  }
  return processor_->IdToPiece(id);
}

int Tokenizer::vocab_size() const { return processor_->GetPieceSize(); }

}  // namespace memtrain::data
