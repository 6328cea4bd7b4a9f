#pragma once
// Fill-mask predictions (as Hugging Face's fill-mask pipeline shows them): the model's top-k
// tokens and probabilities at each [MASK] of a sentence.
#include <string>
#include <vector>

#include "models/bert_for_masked_lm.hpp"
#include "runtime/data/tokenizer.hpp"

namespace memtrain::train {

struct TokenProbability {
  std::string token;  // the piece, with SentencePiece's word-start marker removed
  double probability = 0;
};

struct FillMaskResult {
  std::string text;
  std::vector<std::vector<TokenProbability>> masks;  // per [MASK], top_k, most probable first
};

// Builds the one-row batch with data::fill_mask_prompt ("[CLS] text [SEP]", the literal
// "[MASK]" in `text` becoming the mask token), asks model.predict_log_probs at every mask and
// keeps the `top_k` most probable tokens. Throws ConfigError when `text` has no [MASK] or is
// longer than max_positions tokens.
FillMaskResult fill_mask(models::BertForMaskedLM& model, const data::Tokenizer& tokenizer,
                         const std::string& text, int top_k, int max_positions);

// "And God said, Let there be [MASK]\n    light 0.412 | the 0.101 | ..." (one line per mask).
std::string format_fill_mask(const FillMaskResult& result);

// The probe sentences printed at the end of a KJV run: verses with a masked word whose answer
// a reader knows, so the predictions show at a glance whether the model learned anything.
const std::vector<std::string>& fill_mask_probes();

}  // namespace memtrain::train
