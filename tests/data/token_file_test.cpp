// Binary token files: exact round trip, and damaged files rejected with RuntimeError.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "runtime/core/errors.hpp"
#include "runtime/data/token_file.hpp"
#include "tests/data/data_test_support.hpp"

namespace memtrain::data {
namespace {

TokenizedSplit sample_split() {
  TokenizedSplit split;
  split.tokens = {5, 6, 7, 8, 9, 10, 30521, 11};
  split.segment_offsets = {0, 3, 3, 7, 8};  // includes an empty segment
  split.document_offsets = {0, 2, 4};
  return split;
}

TEST(TokenFile, RoundTripsExactly) {
  testing::TempDir dir;
  const TokenizedSplit split = sample_split();
  write_token_file(dir.file("t.tokens"), split);
  // 40-byte header + 3 + 5 eight-byte offsets + 8 four-byte tokens.
  EXPECT_EQ(std::filesystem::file_size(dir.file("t.tokens")), 40u + 8 * 8 + 4 * 8);
  const TokenizedSplit back = read_token_file(dir.file("t.tokens"));
  EXPECT_EQ(back.tokens, split.tokens);
  EXPECT_EQ(back.segment_offsets, split.segment_offsets);
  EXPECT_EQ(back.document_offsets, split.document_offsets);
}

TEST(TokenFile, TruncatedOrForeignFileIsRuntimeError) {
  testing::TempDir dir;
  write_token_file(dir.file("t.tokens"), sample_split());
  std::filesystem::resize_file(dir.file("t.tokens"), 100);
  EXPECT_THROW(read_token_file(dir.file("t.tokens")), RuntimeError);
  testing::write_file(dir.file("foreign.tokens"), std::string(200, 'x'));
  EXPECT_THROW(read_token_file(dir.file("foreign.tokens")), RuntimeError);
  EXPECT_THROW(read_token_file(dir.file("absent.tokens")), RuntimeError);
}

TEST(TokenFile, InconsistentOffsetsAreRejectedOnWrite) {
  testing::TempDir dir;
  TokenizedSplit split = sample_split();
  split.segment_offsets = {0, 5, 3, 8};
  EXPECT_THROW(write_token_file(dir.file("t.tokens"), split), RuntimeError);
}

}  // namespace
}  // namespace memtrain::data
