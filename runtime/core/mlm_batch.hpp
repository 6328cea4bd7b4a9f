#pragma once
// One micro-batch of masked-LM input, as the data pipeline produces it and the model consumes it.
// Lives in runtime/core, below both runtime/data and models/: the data layer knows no model
// and a layer can be built and tested without data code.
#include <cstdint>
#include <vector>

namespace memtrain::core {

struct MlmBatch {
  int batch_size = 0;                          // B
  int seq_length = 0;                          // T (with dynamic padding: the longest sequence of this micro-batch)
  std::vector<std::int32_t> input_ids;         // [B, T], already masked ([MASK]/random/kept)
  std::vector<std::int32_t> token_type_ids;    // [B, T]
  std::vector<float> attention_mask;           // [B, T], 1 = real token, 0 = padding
  std::vector<std::int32_t> masked_positions;  // [M], flat index b * T + t, ascending
  std::vector<std::int32_t> masked_labels;     // [M], original token id at that position
  std::uint64_t first_sample = 0;              // global index of sample 0 (keys dropout RNG, design.md)
};

}  // namespace memtrain::core
