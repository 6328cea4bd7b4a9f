#pragma once
// BERT's embeddings (word + position + token type) through the op API: kernels/cpu/embedding or
// kernels/cuda/embedding, with their contracts.
#include <cstdint>

#include "kernels/op_context.hpp"

namespace memtrain::kernels::ops {

// out [B, T, C] = word[ids] + pos[t] + type[type_ids] from word [V, C], pos [P >= T, C] and
// type [TV, C]; ids, type_ids [B, T]. Throws std::out_of_range naming the position of an id
// outside [0, V) or a type id outside [0, TV); nothing is written then.
void bert_embeddings_forward(const OpContext& kc, float* out, const std::int32_t* ids, const std::int32_t* type_ids,
                             const float* word, const float* pos, const float* type, int B, int T, int C, int V,
                             int TV);

// Accumulates (+=) dout [B, T, C] into dword [V, C], dpos [P, C] and dtype [TV, C] at the
// forward's rows (each may be null to skip).
void bert_embeddings_backward(const OpContext& kc, float* dword, float* dpos, float* dtype, const float* dout,
                              const std::int32_t* ids, const std::int32_t* type_ids, int B, int T, int C);

// Megatron-LM's vocabulary-parallel lookup (kernels/cpu/embedding.hpp): out [B, T, C] is
// overwritten with word_shard [rows, C]'s row id - first_row for ids in [first_row, first_row +
// rows) and zero for the others (another rank's rows), plus pos [P, C] and type [TV, C] rows
// when with_positions (one rank of the group adds them). Throws std::out_of_range for an id
// outside [0, V) or a type id outside [0, TV), writing nothing; std::runtime_error on a CUDA
// context (CPU only so far).
void vocab_parallel_embeddings_forward(const OpContext& kc, float* out, const std::int32_t* ids,
                                       const std::int32_t* type_ids, const float* word_shard, const float* pos,
                                       const float* type, int B, int T, int C, int V, int TV, std::int64_t first_row,
                                       std::int64_t rows, bool with_positions);

// Its gradient: accumulates (+=) dout [B, T, C] into dword_shard [rows, C] at the ids inside
// [first_row, first_row + rows) (validated by the forward pass); other ids are another rank's.
// CPU only so far, as the forward.
void vocab_parallel_embedding_backward(const OpContext& kc, float* dword_shard, const float* dout,
                                       const std::int32_t* ids, int B, int T, int C, std::int64_t first_row,
                                       std::int64_t rows);

}  // namespace memtrain::kernels::ops
