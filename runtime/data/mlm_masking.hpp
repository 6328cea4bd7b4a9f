#pragma once
// BERT's masked-LM corruption of one sequence (Devlin et al. 2019, section 3.1 and appendix
// A.1): choose mlm_probability of the tokens; of those, 80% become [MASK], 10% a random token,
// 10% stay unchanged. The model predicts the original token at every chosen position.
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/philox.hpp"
#include "runtime/data/special_tokens.hpp"

namespace memtrain::data {

class MlmMasking {
 public:
  // vocab_size: pieces the random replacement draws from ([kFirstOrdinaryId, vocab_size)).
  // Throws ConfigError when mlm_probability is not in (0, 1] or vocab_size <= kFirstOrdinaryId.
  MlmMasking(float mlm_probability, int vocab_size, std::uint64_t seed);

  // Masks `row` ([L] token ids, [CLS] ... [SEP] and padding included) in place for global sample
  // `sample` and appends the chosen positions (indices into row, ascending, each + `offset`) and
  // their original ids. Special tokens (ids < kFirstOrdinaryId: [PAD] [UNK] [CLS] [SEP] [MASK])
  // are never chosen.
  //
  // Note [Counter-based masking]
  // Every decision at position t of sample i comes from one Philox4x32-10 block (Salmon et al.
  // SC'11, via Random123) with key = seed and counter = (i, t, stream): word 0 decides "chosen"
  // (u < mlm_probability), word 1 the 80/10/10 action, word 2 the random token. The result
  // depends on (seed, i, t) only, so a batch is the same however it is split into micro-batches
  // or ranks, and any step's batch can be rebuilt after a restart.
  // At least one position is chosen per sequence that has a candidate: when none falls under
  // mlm_probability, the candidate with the smallest word 0 is taken, so no sequence
  // contributes zero masked tokens (a loss normalised by the masked count needs at least one).
  void mask(std::uint64_t sample, std::span<std::int32_t> row, std::int32_t offset,
            std::vector<std::int32_t>& positions, std::vector<std::int32_t>& labels) const;

 private:
  std::uint32_t threshold_;  // mlm_probability in units of 2^-32
  int vocab_size_;
  std::uint64_t seed_;
};

// A uniform 32-bit word from Philox4x32-10 for (seed, a, b, stream), word `word` (0..3) of the
// block. Shared by masking, shuffling and mock data so all randomness in runtime/data is
// counter-based.
std::uint32_t philox_word(std::uint64_t seed, std::uint64_t a, std::uint32_t b, std::uint32_t stream, int word);

// kernels::kPhiloxLanes consecutive blocks at once: out[w][j] = philox_word(seed, a, first_b + j,
// stream, w) for j in [0, kernels::kPhiloxLanes) (b wraps modulo 2^32). Bitwise philox_word, at
// vector speed (Note [Many Philox blocks at once] in kernels/philox.hpp): mock rows and
// masking of large micro-batches drew one scalar block per token and dominated `memtrain plan`.
void philox_words(std::uint64_t seed, std::uint64_t a, std::uint32_t first_b, std::uint32_t stream,
                  kernels::PhiloxLaneWords& out);

// Streams of philox_word used in runtime/data (distinct so they never share counters).
inline constexpr std::uint32_t kMaskingStream = 0x4d4c4d31;  // "MLM1"
inline constexpr std::uint32_t kShuffleStream = 0x53485546;  // "SHUF"
inline constexpr std::uint32_t kMockStream = 0x4d4f434b;     // "MOCK"

}  // namespace memtrain::data
