#pragma once
// The five BERT special tokens and their fixed ids.
#include <array>
#include <cstdint>
#include <string_view>

namespace memtrain::data {

// Ids of the special tokens in every vocabulary memtrain builds (SentencePiece or mock).
struct SpecialTokens {
  std::int32_t pad, unk, cls, sep, mask;
};

// Note [Fixed special ids]
// The model, the masking and the mock data all need [PAD]/[CLS]/[SEP]/[MASK] without asking a
// tokenizer (data.mock has none), so the ids are fixed: 0..4 in BERT's order of importance to
// us. The tokenizer trainer reserves exactly these ids (pad_id=0, unk_id=1, then the
// user-defined symbols [CLS],[SEP],[MASK] take 2,3,4) and prepare_data checks the trained model
// agrees. Ordinary pieces therefore start at kFirstOrdinaryId.
inline constexpr SpecialTokens kSpecialTokens{0, 1, 2, 3, 4};
inline constexpr std::int32_t kFirstOrdinaryId = 5;
inline constexpr std::array<std::string_view, 5> kSpecialPieces{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

}  // namespace memtrain::data
