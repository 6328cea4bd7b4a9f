#pragma once
// A fill-mask prompt ("And God said, Let there be [MASK]") as a one-row batch for the model.
#include <string_view>

#include "runtime/core/mlm_batch.hpp"
#include "runtime/data/tokenizer.hpp"

namespace memtrain::data {

// Encodes `text` and wraps it as [CLS] ids [SEP] in a batch of B = 1, T = its length (no
// padding), without the lone "▁" piece SentencePiece puts before a written [MASK]
// (Note [Space before a written mask]). masked_positions are the positions of the [MASK] tokens written in the text (pass
// them to BertForMaskedLM::predict_log_probs); masked_labels hold the mask id there, since the
// answer is unknown. first_sample = 0.
// Throws ConfigError when the text has no [MASK] or the row would exceed max_length tokens.
core::MlmBatch fill_mask_prompt(const Tokenizer& tokenizer, std::string_view text, int max_length);

}  // namespace memtrain::data
