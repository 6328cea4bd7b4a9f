#include "runtime/data/mlm_dataset.hpp"

#include <omp.h>

#include <algorithm>
#include <exception>
#include <numeric>
#include <string>

#include "runtime/core/errors.hpp"
#include "runtime/data/token_file.hpp"

namespace memtrain::data {
namespace {

void check_seq_length(int seq_length) {
  if (seq_length < 3) {
    throw ConfigError("data.seq_length = " + std::to_string(seq_length) +
                      "; expected >= 3 ([CLS], at least one token, [SEP])");
  }
}

}  // namespace

MlmDataset::MlmDataset(const DataConfig& config, int vocab_size, std::uint64_t seed)
    : seq_length_((check_seq_length(config.seq_length), config.seq_length)),
      dynamic_(config.dynamic_seq_length),
      vocab_size_(vocab_size),
      seed_(seed),
      masking_(config.mlm_probability, vocab_size, seed) {}

MlmDataset::MlmDataset(const PreparedData& prepared, bool validation, const DataConfig& config, std::uint64_t seed)
    : MlmDataset(config, prepared.vocab_size, seed) {
  const std::string& path = validation ? prepared.valid_tokens : prepared.train_tokens;
  TokenizedSplit split = read_token_file(path);
  const std::uint32_t room = static_cast<std::uint32_t>(seq_length_ - 2);
  const auto cut = [&](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t at = begin; at < end; at += room) {
      pieces_.push_back({at, static_cast<std::uint32_t>(std::min<std::uint64_t>(room, end - at))});
    }
  };
  if (dynamic_) {
    tokens_ = std::move(split.tokens);
    for (std::uint64_t s = 0; s < split.num_segments(); ++s) {
      cut(split.segment_offsets[s], split.segment_offsets[s + 1]);
    }
  } else {
    tokens_.reserve(split.tokens.size() + split.num_documents());
    for (std::uint64_t d = 0; d < split.num_documents(); ++d) {
      if (d > 0) tokens_.push_back(kSpecialTokens.sep);
      const auto begin = split.segment_offsets[split.document_offsets[d]];
      const auto end = split.segment_offsets[split.document_offsets[d + 1]];
      tokens_.insert(tokens_.end(), split.tokens.begin() + static_cast<std::ptrdiff_t>(begin),
                     split.tokens.begin() + static_cast<std::ptrdiff_t>(end));
    }
    cut(0, tokens_.size());
  }
  if (pieces_.empty()) {
    throw RuntimeError("token file " + path + " holds no tokens; prepare the data again");
  }
  if (pieces_.size() > UINT32_MAX) {
    throw RuntimeError("token file " + path + " holds more than 2^32 sequences");
  }
  if (!validation) {
    // A seeded shuffle that is the same on every machine and library: sort by Philox words
    // (std::shuffle's algorithm is implementation-defined).
    std::vector<std::uint64_t> keyed(pieces_.size());
    for (std::uint32_t j = 0; j < keyed.size(); ++j) {
      keyed[j] = (static_cast<std::uint64_t>(philox_word(seed, j, 0, kShuffleStream, 0)) << 32) | j;
    }
    std::sort(keyed.begin(), keyed.end());
    order_.resize(keyed.size());
    for (std::size_t k = 0; k < keyed.size(); ++k) order_[k] = static_cast<std::uint32_t>(keyed[k]);
  }
}

MlmDataset MlmDataset::mock(const DataConfig& config, int vocab_size, std::uint64_t seed) {
  MlmDataset dataset(config, vocab_size, seed);
  dataset.mock_ = true;
  return dataset;
}

std::uint64_t MlmDataset::num_sequences() const { return mock_ ? (std::uint64_t{1} << 32) : pieces_.size(); }

int MlmDataset::row_length(std::uint64_t sample) const {
  if (!mock_) return static_cast<int>(pieces_[piece_index(sample)].length) + 2;
  if (!dynamic_) return seq_length_;
  const std::uint64_t draw = philox_word(seed_, sample % num_sequences(), 0xFFFFFFFFu, kMockStream, 0);
  return 3 + static_cast<int>((draw * static_cast<std::uint64_t>(seq_length_ - 2)) >> 32);
}

void MlmDataset::write_row(std::uint64_t sample, int length, std::int32_t* out) const {
  out[0] = kSpecialTokens.cls;
  out[length - 1] = kSpecialTokens.sep;
  std::int32_t* tokens = out + 1;  // [length - 2]
  const int n = length - 2;
  if (mock_) {
    const std::uint64_t j = sample % num_sequences();
    const auto num_ordinary = static_cast<std::uint64_t>(vocab_size_ - kFirstOrdinaryId);
    kernels::PhiloxLaneWords words;  // [4, kPhiloxLanes]: blocks of tokens t0 .. t0 + 63
    for (int t0 = 0; t0 < n; t0 += kernels::kPhiloxLanes) {
      philox_words(seed_, j, static_cast<std::uint32_t>(t0), kMockStream, words);
      for (int t = t0; t < std::min(n, t0 + kernels::kPhiloxLanes); ++t) {
        const std::uint64_t draw = words[0][t - t0];
        tokens[t] = kFirstOrdinaryId + static_cast<std::int32_t>((draw * num_ordinary) >> 32);
      }
    }
  } else {
    const Piece& piece = pieces_[piece_index(sample)];
    std::copy_n(tokens_.begin() + static_cast<std::ptrdiff_t>(piece.offset), n, tokens);
  }
}

core::MlmBatch MlmDataset::batch(std::uint64_t first_sample, int batch_size) const {
  if (batch_size < 1) {
    throw ConfigError("batch size " + std::to_string(batch_size) + "; expected >= 1");
  }
  // Lengths first, so that each row is written once, in place, into the padded [B, T] ids.
  std::vector<int> lengths(static_cast<std::size_t>(batch_size));
  int T = dynamic_ ? 0 : seq_length_;
  for (int b = 0; b < batch_size; ++b) {
    lengths[b] = row_length(first_sample + static_cast<std::uint64_t>(b));
    T = std::max(T, lengths[b]);
  }
  core::MlmBatch batch;
  batch.batch_size = batch_size;
  batch.seq_length = T;
  batch.first_sample = first_sample;
  const auto BT = static_cast<std::size_t>(batch_size) * static_cast<std::size_t>(T);
  batch.input_ids.assign(BT, kSpecialTokens.pad);  // [B, T]
  batch.token_type_ids.assign(BT, 0);              // [B, T]
  batch.attention_mask.assign(BT, 0.0f);           // [B, T]
  // Note [Rows of a batch on the thread team]
  // A row's tokens and masks depend on (seed, sample, position) only, so large batches (`memtrain
  // plan` probes micro-batches of up to 65,536 rows and spent most of its time here) are written
  // on the OpenMP team, each thread a contiguous run of rows with its own position and label
  // lists, joined in thread order afterwards: the batch is the same on any thread count.
  const int team = batch_size >= 256 ? std::max(1, omp_get_max_threads()) : 1;
  std::vector<std::vector<std::int32_t>> positions(static_cast<std::size_t>(team));
  std::vector<std::vector<std::int32_t>> labels(static_cast<std::size_t>(team));
  std::exception_ptr failure;  // nothing may escape an OpenMP region
#pragma omp parallel num_threads(team) if (team > 1)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int lo = static_cast<int>(std::int64_t{batch_size} * t / nt);
    const int hi = static_cast<int>(std::int64_t{batch_size} * (t + 1) / nt);
    try {
      for (int b = lo; b < hi; ++b) {
        const auto offset = static_cast<std::ptrdiff_t>(b) * T;
        std::int32_t* row = batch.input_ids.data() + offset;  // [lengths[b]] of [T]
        write_row(first_sample + static_cast<std::uint64_t>(b), lengths[b], row);
        masking_.mask(first_sample + static_cast<std::uint64_t>(b),
                      std::span<std::int32_t>(row, static_cast<std::size_t>(lengths[b])), b * T, positions[t],
                      labels[t]);
        std::fill_n(batch.attention_mask.begin() + offset, lengths[b], 1.0f);
      }
    } catch (...) {
#pragma omp critical(memtrain_batch_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  if (team == 1) {
    batch.masked_positions = std::move(positions[0]);
    batch.masked_labels = std::move(labels[0]);
  } else {
    for (int t = 0; t < team; ++t) {
      batch.masked_positions.insert(batch.masked_positions.end(), positions[t].begin(), positions[t].end());
      batch.masked_labels.insert(batch.masked_labels.end(), labels[t].begin(), labels[t].end());
    }
  }
  return batch;
}

}  // namespace memtrain::data
