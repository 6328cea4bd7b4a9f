#include "runtime/train/fill_mask.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "runtime/data/fill_mask_prompt.hpp"
#include "runtime/data/special_tokens.hpp"

namespace memtrain::train {

namespace {

// SentencePiece marks the start of a word with U+2581 (LOWER ONE EIGHTH BLOCK).
std::string readable_piece(std::string piece) {
  static const std::string kWordStart = "\xE2\x96\x81";
  for (auto pos = piece.find(kWordStart); pos != std::string::npos; pos = piece.find(kWordStart)) {
    piece.erase(pos, kWordStart.size());
  }
  return piece;
}

}  // namespace

FillMaskResult fill_mask(models::BertForMaskedLM& model, const data::Tokenizer& tokenizer, const std::string& text,
                         int top_k, int max_positions) {
  const core::MlmBatch batch = data::fill_mask_prompt(tokenizer, text, max_positions);
  const auto log_probs = model.predict_log_probs(batch, batch.masked_positions);  // [P, V]
  const std::size_t V = log_probs.size() / batch.masked_positions.size();
  // See Note [Fill-mask candidates].
  const std::int32_t first = data::kFirstOrdinaryId;
  const std::int32_t end = std::min<std::int32_t>(static_cast<std::int32_t>(V), tokenizer.vocab_size());
  const int num_candidates = std::max<int>(0, end - first);
  const int k = std::min<int>(top_k, num_candidates);

  FillMaskResult result{text, {}, {}};
  for (std::size_t p = 0; p < batch.masked_positions.size(); ++p) {
    const float* row = log_probs.data() + p * V;
    std::vector<std::int32_t> order(static_cast<std::size_t>(num_candidates));
    std::iota(order.begin(), order.end(), first);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [row](std::int32_t a, std::int32_t b) { return row[a] > row[b]; });
    std::vector<TokenProbability> top;
    for (int i = 0; i < k; ++i) {
      top.push_back({readable_piece(tokenizer.id_to_piece(order[i])), std::exp(double(row[order[i]]))});
    }
    result.masks.push_back(std::move(top));
  }
  return result;
}

FillMaskResult fill_mask(models::BertForMaskedLM& model, const data::Tokenizer& tokenizer, const FillMaskProbe& probe,
                         int top_k, int max_positions, bool trained_on_kjv) {
  FillMaskResult result = fill_mask(model, tokenizer, probe.text, top_k, max_positions);
  // The split labels hold for the KJV's own split only: another corpus neither trained on the
  // verse nor held it out.
  const char* where = !trained_on_kjv  ? ", a KJV verse (not from this run's corpus)"
                      : probe.held_out ? ", held out"
                                       : ", training text";
  result.label = probe.reference + where + "; answer: " + probe.answer;
  return result;
}

std::string format_fill_mask_probes(models::BertForMaskedLM& model, const data::Tokenizer& tokenizer,
                                    const std::vector<FillMaskProbe>& probes, int top_k, int max_positions,
                                    bool trained_on_kjv) {
  std::string text;
  for (const auto& probe : probes) {
    try {
      text += format_fill_mask(fill_mask(model, tokenizer, probe, top_k, max_positions, trained_on_kjv));
    } catch (const std::exception& e) {
      text += "  skipped " + probe.reference + ": " + e.what() + "\n";
    }
  }
  return text;
}

std::string format_fill_mask(const FillMaskResult& result) {
  std::ostringstream os;
  os << "  " << result.text;
  if (!result.label.empty()) os << "  (" << result.label << ')';
  os << '\n';
  for (const auto& top : result.masks) {
    os << "     ";
    for (std::size_t i = 0; i < top.size(); ++i) {
      char prob[32];
      std::snprintf(prob, sizeof prob, "%.3f", top[i].probability);
      os << (i ? " | " : " ") << top[i].token << ' ' << prob;
    }
    os << '\n';
  }
  return os.str();
}

const std::vector<FillMaskProbe>& fill_mask_probes() {
  // See Note [Fill-mask probes].
  static const std::vector<FillMaskProbe> kProbes = {
      {"Ge1:3", "And God said, Let there be [MASK]", "light", false},
      {"Psa100:1", "Make a joyful noise unto the [MASK], all ye lands.", "LORD", true},
      {"Psa103:1", "Bless the LORD, O my [MASK]: and all that is within me, bless his holy name.", "soul", true},
      {"Exo25:2",
       "Speak unto the children of [MASK], that they bring me an offering: of every man that "
       "giveth it willingly with his heart ye shall take my offering.",
       "Israel", true},
      {"Psa103:11",
       "For as the heaven is high above the [MASK], so great is his mercy toward them that fear "
       "him.",
       "earth", true},
  };
  return kProbes;
}

}  // namespace memtrain::train
