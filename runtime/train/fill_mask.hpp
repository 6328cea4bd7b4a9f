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
  std::string label;  // where the text comes from, e.g. "Psa103:1, held out; answer: soul"
  std::vector<std::vector<TokenProbability>> masks;  // per [MASK], top_k, most probable first
};

// A KJV verse with one word masked, printed at the end of a run.
struct FillMaskProbe {
  std::string reference;  // as `bible` prints it, e.g. "Psa103:1"
  std::string text;       // the verse with one word replaced by "[MASK]"
  std::string answer;     // the masked word
  bool held_out = false;  // the verse is in the validation split, so training never saw it
};

// Builds the one-row batch with data::fill_mask_prompt ("[CLS] text [SEP]", the literal
// "[MASK]" in `text` becoming the mask token), asks model.predict_log_probs at every mask and
// keeps the `top_k` most probable tokens among the ordinary pieces the tokenizer has
// (Note [Fill-mask candidates]). Throws ConfigError when `text` has no [MASK] or is longer than
// max_positions tokens.
FillMaskResult fill_mask(models::BertForMaskedLM& model, const data::Tokenizer& tokenizer, const std::string& text,
                         int top_k, int max_positions);

// fill_mask on probe.text, labelled with the probe's reference, held-out status and answer;
// `trained_on_kjv` false (data.corpus is another text) labels it a KJV verse outside the run's
// corpus instead, since the held-out status describes the KJV's split.
FillMaskResult fill_mask(models::BertForMaskedLM& model, const data::Tokenizer& tokenizer, const FillMaskProbe& probe,
                         int top_k, int max_positions, bool trained_on_kjv = true);

// Note [Fill-mask candidates]
// model.vocab_size is an upper bound on the tokenizer's size (the unigram trainer stops where
// the text runs out of pieces, see train_tokenizer), so the output layer can have rows for ids
// the tokenizer does not know; their probabilities are noise from initialisation and they have
// no piece to print. Special ids ([PAD], [MASK], ...) are never an answer to a masked word.
// The top-k is therefore taken over [kFirstOrdinaryId, min(V, tokenizer.vocab_size())) only;
// the probabilities stay those of the full softmax, so they need not sum to 1.

// Fill-mask on every probe, formatted as format_fill_mask, for the end of a run. Never throws
// for a probe: one that cannot be run (longer than max_positions tokens, ...) becomes the
// one-line note "  skipped <reference>: <reason>", because a finished run must not fail on
// its illustration.
std::string format_fill_mask_probes(models::BertForMaskedLM& model, const data::Tokenizer& tokenizer,
                                    const std::vector<FillMaskProbe>& probes, int top_k, int max_positions,
                                    bool trained_on_kjv = true);

// "And God said, Let there be [MASK]\n    light 0.412 | the 0.101 | ..." (one line per mask).
std::string format_fill_mask(const FillMaskResult& result);

// Note [Fill-mask probes]
// The probes printed at the end of a KJV run should show whether the model learned to use
// context, not whether it memorised its training text. So all but the first are whole verses
// from the validation split (data.validation_fraction's default held-out ranges, see
// Note [Held-out ranges]) whose text occurs nowhere in the training split, each masking a
// content word a reader can guess from the sentence (LORD, soul, Israel, earth). The first is
// the example, Genesis 1:3, which is training text and labelled so: it shows what the
// model recalls. tests/train/fill_mask_probes_test.cpp checks each label against the split.
const std::vector<FillMaskProbe>& fill_mask_probes();

}  // namespace memtrain::train
