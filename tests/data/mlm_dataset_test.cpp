// MlmDataset: packing against the token files, shuffling as a permutation, determinism from
// (seed, sample index), independence of the batch split, dynamic padding, mock data.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <map>

#include "runtime/core/errors.hpp"
#include "runtime/data/mlm_dataset.hpp"
#include "runtime/data/token_file.hpp"
#include "tests/data/data_test_support.hpp"

namespace memtrain::data {
namespace {

using testing::small_prepared;

// Row b of a batch with the masked labels put back: the sequence before masking.
std::vector<std::int32_t> restored_row(const core::MlmBatch& batch, int b) {
  const int T = batch.seq_length;
  std::vector<std::int32_t> row(batch.input_ids.begin() + b * T, batch.input_ids.begin() + (b + 1) * T);
  for (std::size_t k = 0; k < batch.masked_positions.size(); ++k) {
    const int p = batch.masked_positions[k];
    if (p / T == b) row[p % T] = batch.masked_labels[k];
  }
  const auto real = static_cast<std::size_t>(
      std::count(batch.attention_mask.begin() + b * T, batch.attention_mask.begin() + (b + 1) * T, 1.0f));
  row.resize(real);
  return row;
}

// The packed sequences built here from the token file, independently of MlmDataset: documents
// joined by [SEP], cut into seq_length - 2 pieces, each wrapped in [CLS] .. [SEP].
std::vector<std::vector<std::int32_t>> packed_reference(const std::string& path, int seq_length) {
  const TokenizedSplit split = read_token_file(path);
  std::vector<std::int32_t> stream;
  for (std::uint64_t d = 0; d < split.num_documents(); ++d) {
    if (d > 0) stream.push_back(kSpecialTokens.sep);
    for (auto t = split.segment_offsets[split.document_offsets[d]];
         t < split.segment_offsets[split.document_offsets[d + 1]]; ++t) {
      stream.push_back(split.tokens[t]);
    }
  }
  std::vector<std::vector<std::int32_t>> rows;
  const std::size_t room = static_cast<std::size_t>(seq_length - 2);
  for (std::size_t at = 0; at < stream.size(); at += room) {
    std::vector<std::int32_t> row{kSpecialTokens.cls};
    row.insert(row.end(), stream.begin() + at, stream.begin() + std::min(stream.size(), at + room));
    row.push_back(kSpecialTokens.sep);
    rows.push_back(row);
  }
  return rows;
}

TEST(MlmDataset, ValidationRowsArePackedTokenFileInOrder) {
  const auto& s = small_prepared();
  const MlmDataset dataset(s.prepared, /*validation=*/true, s.config, 1);
  const auto reference = packed_reference(s.prepared.valid_tokens, s.config.seq_length);
  ASSERT_EQ(dataset.num_sequences(), reference.size());
  const auto batch = dataset.batch(0, static_cast<int>(reference.size()));
  EXPECT_EQ(batch.seq_length, s.config.seq_length);
  for (std::size_t b = 0; b < reference.size(); ++b) {
    EXPECT_EQ(restored_row(batch, static_cast<int>(b)), reference[b]) << "row " << b;
  }
}

TEST(MlmDataset, TrainingEpochVisitsEverySequenceOnceInShuffledOrder) {
  const auto& s = small_prepared();
  const MlmDataset dataset(s.prepared, /*validation=*/false, s.config, 1);
  auto reference = packed_reference(s.prepared.train_tokens, s.config.seq_length);
  const int n = static_cast<int>(dataset.num_sequences());
  ASSERT_EQ(static_cast<std::size_t>(n), reference.size());
  const auto batch = dataset.batch(0, n);
  std::vector<std::vector<std::int32_t>> rows;
  for (int b = 0; b < n; ++b) rows.push_back(restored_row(batch, b));
  EXPECT_NE(rows, reference);  // shuffled
  std::sort(rows.begin(), rows.end());
  std::sort(reference.begin(), reference.end());
  EXPECT_EQ(rows, reference);  // a permutation
  // The next epoch repeats the order with fresh masks.
  const auto first = dataset.batch(0, 1), again = dataset.batch(n, 1);
  EXPECT_EQ(restored_row(first, 0), restored_row(again, 0));
  EXPECT_NE(first.masked_positions, again.masked_positions);
}

void expect_same_rows(const core::MlmBatch& whole, int offset, const core::MlmBatch& part) {
  const int T = whole.seq_length;
  ASSERT_EQ(part.seq_length, T);
  for (int b = 0; b < part.batch_size; ++b) {
    for (int t = 0; t < T; ++t) {
      EXPECT_EQ(part.input_ids[b * T + t], whole.input_ids[(offset + b) * T + t]);
      EXPECT_EQ(part.attention_mask[b * T + t], whole.attention_mask[(offset + b) * T + t]);
    }
  }
  std::vector<std::pair<int, int>> expected, got;
  for (std::size_t k = 0; k < whole.masked_positions.size(); ++k) {
    const int p = whole.masked_positions[k];
    if (p / T >= offset && p / T < offset + part.batch_size) {
      expected.emplace_back(p - offset * T, whole.masked_labels[k]);
    }
  }
  for (std::size_t k = 0; k < part.masked_positions.size(); ++k) {
    got.emplace_back(part.masked_positions[k], part.masked_labels[k]);
  }
  EXPECT_EQ(got, expected);
}

TEST(MlmDataset, BatchIsIndependentOfHowItIsSplit) {
  const auto& s = small_prepared();
  const MlmDataset dataset(s.prepared, false, s.config, 1234);
  const auto whole = dataset.batch(100, 4);
  EXPECT_EQ(whole.first_sample, 100u);
  const auto a = dataset.batch(100, 2), b = dataset.batch(102, 2);
  EXPECT_EQ(b.first_sample, 102u);
  expect_same_rows(whole, 0, a);
  expect_same_rows(whole, 2, b);
}

TEST(MlmDataset, SameSeedAndIndexGiveSameBatchAcrossInstances) {
  const auto& s = small_prepared();
  const MlmDataset one(s.prepared, false, s.config, 77), two(s.prepared, false, s.config, 77);
  two.batch(5, 3);  // no hidden state
  const auto x = one.batch(40, 4), y = two.batch(40, 4);
  EXPECT_EQ(x.input_ids, y.input_ids);
  EXPECT_EQ(x.masked_positions, y.masked_positions);
  EXPECT_EQ(x.masked_labels, y.masked_labels);
  const MlmDataset other(s.prepared, false, s.config, 78);
  EXPECT_NE(other.batch(40, 4).input_ids, x.input_ids);
}

// From 256 rows a batch is built on the thread team (Note [Rows of a batch on the thread team]):
// the same rows and masks, in the same order, as batches of 64 built on one thread, and the same
// batch on 1 and 3 threads.
TEST(MlmDataset, LargeBatchesOnTheThreadTeamMatchSmallOnes) {
  const auto& s = small_prepared();
  const MlmDataset dataset(s.prepared, false, s.config, 99);
  const int before = omp_get_max_threads();
  omp_set_num_threads(3);
  const auto whole = dataset.batch(7, 512);
  omp_set_num_threads(1);
  const auto serial = dataset.batch(7, 512);
  omp_set_num_threads(before);
  EXPECT_EQ(whole.input_ids, serial.input_ids);
  EXPECT_EQ(whole.masked_positions, serial.masked_positions);
  EXPECT_EQ(whole.masked_labels, serial.masked_labels);
  EXPECT_TRUE(std::is_sorted(whole.masked_positions.begin(), whole.masked_positions.end()));
  for (int k = 0; k < 8; ++k) expect_same_rows(whole, 64 * k, dataset.batch(7 + 64 * k, 64));
}

TEST(MlmDataset, DynamicSeqLengthPadsEachBatchToItsLongestRow) {
  const auto& s = small_prepared();
  DataConfig config = s.config;
  config.dynamic_seq_length = true;
  config.seq_length = 64;
  const MlmDataset dataset(s.prepared, true, config, 3);
  // Validation is in order, one row per line: row lengths are the lines' token counts + 2.
  const TokenizedSplit split = read_token_file(s.prepared.valid_tokens);
  ASSERT_EQ(dataset.num_sequences(), split.num_segments());
  std::map<int, int> widths;
  for (int first = 0; first + 4 <= 40; first += 4) {
    const auto batch = dataset.batch(first, 4);
    int longest = 0;
    for (int b = 0; b < 4; ++b) {
      const int length = static_cast<int>(split.segment_offsets[first + b + 1] - split.segment_offsets[first + b]) + 2;
      longest = std::max(longest, length);
      const auto row = restored_row(batch, b);
      ASSERT_EQ(static_cast<int>(row.size()), length);
      EXPECT_EQ(row.front(), kSpecialTokens.cls);
      EXPECT_EQ(row.back(), kSpecialTokens.sep);
    }
    ASSERT_EQ(batch.seq_length, longest);
    const int T = batch.seq_length;
    ASSERT_EQ(batch.input_ids.size(), static_cast<std::size_t>(4 * T));
    ASSERT_EQ(batch.token_type_ids.size(), static_cast<std::size_t>(4 * T));
    for (int b = 0; b < 4; ++b) {
      const int length = static_cast<int>(split.segment_offsets[first + b + 1] - split.segment_offsets[first + b]) + 2;
      for (int t = 0; t < T; ++t) {
        EXPECT_EQ(batch.attention_mask[b * T + t], t < length ? 1.0f : 0.0f);
        if (t >= length) {
          EXPECT_EQ(batch.input_ids[b * T + t], kSpecialTokens.pad);
        }
      }
    }
    for (const int p : batch.masked_positions) {
      EXPECT_EQ(batch.attention_mask[p], 1.0f) << "masked a padding position";
    }
    ++widths[T];
  }
  EXPECT_GT(widths.size(), 1u) << "generated lines vary in length, so should batch widths";
}

// A line longer than seq_length - 2 tokens becomes several rows, none wider than seq_length,
// and their contents concatenate back to the line.
TEST(MlmDataset, DynamicSeqLengthSplitsLongLines) {
  const auto& s = small_prepared();
  DataConfig config = s.config;
  config.dynamic_seq_length = true;
  config.seq_length = 8;
  const MlmDataset dataset(s.prepared, true, config, 3);
  const TokenizedSplit split = read_token_file(s.prepared.valid_tokens);
  std::uint64_t expected_rows = 0;
  for (std::uint64_t g = 0; g < split.num_segments(); ++g) {
    expected_rows += (split.segment_offsets[g + 1] - split.segment_offsets[g] + 5) / 6;
  }
  ASSERT_EQ(dataset.num_sequences(), expected_rows);
  ASSERT_GT(expected_rows, split.num_segments());
  const auto batch = dataset.batch(0, static_cast<int>(expected_rows));
  EXPECT_LE(batch.seq_length, 8);
  std::vector<std::int32_t> contents;
  for (int b = 0; b < batch.batch_size; ++b) {
    const auto row = restored_row(batch, b);
    ASSERT_GE(row.size(), 3u);
    EXPECT_EQ(row.front(), kSpecialTokens.cls);
    EXPECT_EQ(row.back(), kSpecialTokens.sep);
    contents.insert(contents.end(), row.begin() + 1, row.end() - 1);
  }
  EXPECT_EQ(contents, split.tokens);
}

TEST(MlmDataset, MockGivesUniformIdsAndFixedOrDynamicShapes) {
  DataConfig config;
  config.mock = true;
  config.seq_length = 16;
  const MlmDataset fixed = MlmDataset::mock(config, 30522, 5);
  const auto batch = fixed.batch(0, 8);
  EXPECT_EQ(batch.seq_length, 16);
  for (int b = 0; b < 8; ++b) {
    const auto row = restored_row(batch, b);
    ASSERT_EQ(row.size(), 16u);
    EXPECT_EQ(row.front(), kSpecialTokens.cls);
    EXPECT_EQ(row.back(), kSpecialTokens.sep);
    for (std::size_t t = 1; t + 1 < row.size(); ++t) {
      EXPECT_GE(row[t], kFirstOrdinaryId);
      EXPECT_LT(row[t], 30522);
    }
  }
  EXPECT_EQ(fixed.batch(3, 2).input_ids,
            std::vector<std::int32_t>(batch.input_ids.begin() + 3 * 16, batch.input_ids.begin() + 5 * 16));
  // Token t of mock row j is the multiply-shift of philox_word(seed, j, t, kMockStream, 0), on a
  // row longer than one batch of Philox lanes (64).
  config.seq_length = 150;
  const auto wide = MlmDataset::mock(config, 30522, 5).batch(7, 1);
  const auto wide_row = restored_row(wide, 0);
  ASSERT_EQ(wide_row.size(), 150u);
  for (std::uint32_t t = 0; t < 148; ++t) {
    const std::uint64_t draw = philox_word(5, 7, t, kMockStream, 0);
    EXPECT_EQ(wide_row[t + 1], kFirstOrdinaryId + static_cast<std::int32_t>((draw * (30522 - kFirstOrdinaryId)) >> 32))
        << "position " << t + 1;
  }
  config.seq_length = 16;
  config.dynamic_seq_length = true;
  const MlmDataset dynamic = MlmDataset::mock(config, 30522, 5);
  std::map<int, int> widths;
  for (int i = 0; i < 20; ++i) {
    const auto b = dynamic.batch(i * 2, 2);
    EXPECT_LE(b.seq_length, 16);
    EXPECT_GE(b.seq_length, 3);
    ++widths[b.seq_length];
  }
  EXPECT_GT(widths.size(), 2u);
}

TEST(MlmDataset, BadSettingsAreConfigErrors) {
  DataConfig config;
  config.seq_length = 2;
  EXPECT_THROW(MlmDataset::mock(config, 100, 1), ConfigError);
  config.seq_length = 16;
  config.mlm_probability = 0.0f;
  EXPECT_THROW(MlmDataset::mock(config, 100, 1), ConfigError);
  config.mlm_probability = 0.15f;
  EXPECT_THROW(MlmDataset::mock(config, 100, 1).batch(0, 0), ConfigError);
}

TEST(MlmDataset, MissingTokenFileIsRuntimeError) {
  PreparedData prepared;
  prepared.train_tokens = "/nonexistent/train.tokens";
  prepared.vocab_size = 100;
  EXPECT_THROW(MlmDataset(prepared, false, DataConfig{}, 1), RuntimeError);
}

}  // namespace
}  // namespace memtrain::data
