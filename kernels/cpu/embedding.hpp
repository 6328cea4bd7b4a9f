#pragma once
#include <cstdint>

#include "kernels/cpu/scalar.hpp"

namespace memtrain::kernels {

// BERT input embeddings before LayerNorm: out[b,t,:] = word[ids[b,t]] + pos[t] +
// type[type_ids[b,t]]. Shapes: out [B, T, C]; ids, type_ids [B, T] (type_ids nullptr = all 0); word
// [V, C]; pos [P, C] (T <= P); type [TV, C]. Throws std::out_of_range naming (b, t) for an id
// outside [0, V) or a type id outside [0, TV); nothing is written then.
template <class Scalar>
void bert_embeddings_forward(Scalar* out, const std::int32_t* ids, const std::int32_t* type_ids, const Scalar* word,
                             const Scalar* pos, const Scalar* type, int B, int T, int C, int V, int TV);

// Accumulates (+=) into dword [V, C], dpos [P, C], dtype [TV, C] (each may be nullptr to skip).
// dout [B, T, C]; ids, type_ids as in the forward pass (already validated there).
template <class Scalar>
void bert_embeddings_backward(NoDeduce<Scalar>* dword, NoDeduce<Scalar>* dpos, NoDeduce<Scalar>* dtype,
                              const Scalar* dout, const std::int32_t* ids, const std::int32_t* type_ids, int B, int T,
                              int C);

// The vocabulary-parallel forward (Megatron-LM's VocabParallelEmbedding): word_shard
// [rows, C] holds table rows [first_row, first_row + rows); an id outside that range
// contributes a zero word vector, so the sum of this output over the tensor-parallel ranks is
// the whole lookup. with_positions adds pos[t] + type[type_ids[b,t]] (one rank of the group
// does, so that the sum counts them once): out[b,t,:] = (word[id] or 0) (+ pos[t] + type[..]).
// Shapes as bert_embeddings_forward. Throws std::out_of_range as there (ids against V, the
// unsharded vocabulary); nothing is written then.
template <class Scalar>
void vocab_parallel_embeddings_forward(Scalar* out, const std::int32_t* ids, const std::int32_t* type_ids,
                                       const Scalar* word_shard, const Scalar* pos, const Scalar* type, int B, int T,
                                       int C, int V, int TV, std::int64_t first_row, std::int64_t rows,
                                       bool with_positions);

// Accumulates (+=) dout [B, T, C] into dword_shard [rows, C] at the ids inside [first_row,
// first_row + rows) (already validated by the forward pass); other ids are another rank's.
template <class Scalar>
void vocab_parallel_embedding_backward(NoDeduce<Scalar>* dword_shard, const Scalar* dout, const std::int32_t* ids,
                                       int B, int T, int C, std::int64_t first_row, std::int64_t rows);

}  // namespace memtrain::kernels
