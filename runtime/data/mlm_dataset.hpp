#pragma once
// The masked-LM sample stream of one split: token sequences, shuffled, masked per sample.
#include <cstdint>
#include <vector>

#include "runtime/core/mlm_batch.hpp"
#include "runtime/data/data_config.hpp"
#include "runtime/data/mlm_masking.hpp"
#include "runtime/data/prepare_data.hpp"

namespace memtrain::data {

class MlmDataset {
 public:
  // Loads the train (validation = false) or validation token file of `prepared`.
  //
  // Note [Sequences]
  // data.dynamic_seq_length = false (packing, as BERT/RoBERTa pre-training): the split's
  // documents are concatenated with a [SEP] between documents and cut into pieces of
  // seq_length - 2 tokens; each sequence is [CLS] piece [SEP], so every row of every batch has
  // seq_length positions (only the very last piece is shorter and padded).
  // data.dynamic_seq_length = true: one sequence per segment (verse or line), [CLS] segment
  // [SEP], a segment longer than seq_length - 2 split into pieces; a micro-batch is padded only
  // to its longest row. Rows are never reordered by length: the varying shapes are the point
  // (the workload that fragments allocators).
  //
  // Throws ConfigError (seq_length < 3, mlm_probability outside (0, 1]) or RuntimeError
  // (unreadable or corrupt token file, a split without any sequence).
  MlmDataset(const PreparedData& prepared, bool validation, const DataConfig& config, std::uint64_t seed);

  // data.mock: token ids uniform over the ordinary ids [kFirstOrdinaryId, vocab_size), no
  // tokenizer. Rows are seq_length long, or of a uniform length in [3, seq_length] with
  // dynamic_seq_length. num_sequences() is 2^32 (the stream never repeats in practice).
  static MlmDataset mock(const DataConfig& config, int vocab_size, std::uint64_t seed);

  std::uint64_t num_sequences() const;
  int vocab_size() const { return vocab_size_; }

  // Rows first_sample .. first_sample + batch_size - 1 of the sample stream. Sample i is
  // sequence order[i mod num_sequences()] (order: a seeded permutation for training, identity
  // for validation and mock) masked with (seed, i) (Note [Counter-based masking]), so a row
  // depends on (seed, i) only: batch(0, 4) rows == batch(0, 2) rows then batch(2, 2) rows
  // (with dynamic padding each batch is padded to its own longest row).
  // Shapes: input_ids, token_type_ids (all 0), attention_mask [B, T]; T = seq_length, or the
  // longest row with dynamic_seq_length. Padding is [PAD] with attention_mask 0.
  // Throws ConfigError when batch_size < 1.
  core::MlmBatch batch(std::uint64_t first_sample, int batch_size) const;

 private:
  struct Piece {
    std::uint64_t offset;  // into tokens_
    std::uint32_t length;  // tokens, without [CLS]/[SEP]
  };

  MlmDataset(const DataConfig& config, int vocab_size, std::uint64_t seed);
  // Index into pieces_ of sample i (training rows in the shuffled order).
  std::size_t piece_index(std::uint64_t sample) const {
    const std::uint64_t k = sample % pieces_.size();
    return order_.empty() ? k : order_[k];
  }
  // Tokens of sample i's row, [CLS] and [SEP] included: at most seq_length_.
  int row_length(std::uint64_t sample) const;
  // Writes sample i's unmasked row [CLS] ... [SEP] ([length] ids, length = row_length(i)) to out.
  void write_row(std::uint64_t sample, int length, std::int32_t* out) const;

  int seq_length_;
  bool dynamic_;
  bool mock_ = false;
  int vocab_size_;
  std::uint64_t seed_;
  MlmMasking masking_;
  std::vector<std::int32_t> tokens_;
  std::vector<Piece> pieces_;
  std::vector<std::uint32_t> order_;  // empty = identity
};

}  // namespace memtrain::data
