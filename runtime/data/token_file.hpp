#pragma once
// Binary token files: one split of the corpus, encoded, with its segment and document bounds.
#include <cstdint>
#include <string>
#include <vector>

namespace memtrain::data {

// Segment s is tokens [segment_offsets[s], segment_offsets[s+1]); document d is segments
// [document_offsets[d], document_offsets[d+1]). Both offset arrays start at 0 and end at the
// total count.
struct TokenizedSplit {
  std::vector<std::int32_t> tokens;
  std::vector<std::uint64_t> segment_offsets{0};
  std::vector<std::uint64_t> document_offsets{0};

  std::uint64_t num_segments() const { return segment_offsets.size() - 1; }
  std::uint64_t num_documents() const { return document_offsets.size() - 1; }
};

// File layout, all little-endian (the file is only read back on the machine family that wrote
// it; a big-endian host fails to compile this code rather than misread a file):
//   char magic[8] = "MTTOKENS"; u32 version = 1; u32 reserved = 0;
//   u64 num_documents, num_segments, num_tokens;
//   u64 document_offsets[num_documents + 1]; u64 segment_offsets[num_segments + 1];
//   i32 tokens[num_tokens]
// write_token_file throws RuntimeError when the file cannot be written (it is flushed and
// fsynced before returning). read_token_file throws RuntimeError on a missing, truncated or
// inconsistent file (offsets not ascending, counts not matching the size).
void write_token_file(const std::string& path, const TokenizedSplit& split);
TokenizedSplit read_token_file(const std::string& path);

}  // namespace memtrain::data
