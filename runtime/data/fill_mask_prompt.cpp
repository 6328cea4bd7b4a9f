#include "runtime/data/fill_mask_prompt.hpp"

#include <string>

#include "runtime/core/errors.hpp"

namespace memtrain::data {

core::MlmBatch fill_mask_prompt(const Tokenizer& tokenizer, std::string_view text, int max_length) {
  const SpecialTokens& special = tokenizer.special();
  std::vector<std::int32_t> row{special.cls};
  // Note [Space before a written mask]
  // SentencePiece encodes "be [MASK]" as "▁be", "▁", "[MASK]": the user-defined symbol takes no
  // word-boundary marker, so a lone "▁" piece precedes it. In training a mask replaces a whole
  // piece such as "▁light", space included, so that lone "▁" never precedes a mask there; it is
  // dropped here to give the model the input shape it was trained on.
  const auto ids = tokenizer.encode(text);
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const bool lone_space_before_mask =
        k + 1 < ids.size() && ids[k + 1] == special.mask && tokenizer.id_to_piece(ids[k]) == "\u2581";
    if (!lone_space_before_mask) row.push_back(ids[k]);
  }
  row.push_back(special.sep);
  if (static_cast<int>(row.size()) > max_length) {
    throw ConfigError("fill-mask prompt '" + std::string(text) + "' is " + std::to_string(row.size()) +
                      " tokens with [CLS]/[SEP]; expected at most " + std::to_string(max_length));
  }
  core::MlmBatch batch;
  batch.batch_size = 1;
  batch.seq_length = static_cast<int>(row.size());
  for (std::size_t t = 0; t < row.size(); ++t) {
    if (row[t] == special.mask) {
      batch.masked_positions.push_back(static_cast<std::int32_t>(t));
      batch.masked_labels.push_back(special.mask);
    }
  }
  if (batch.masked_positions.empty()) {
    throw ConfigError("fill-mask prompt '" + std::string(text) + "' has no [MASK]");
  }
  batch.token_type_ids.assign(row.size(), 0);     // [1, T]
  batch.attention_mask.assign(row.size(), 1.0f);  // [1, T]
  batch.input_ids = std::move(row);               // [1, T]
  return batch;
}

}  // namespace memtrain::data
