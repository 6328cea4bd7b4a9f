#pragma once
#include <cstdint>

#include "kernels/cpu/scalar.hpp"

namespace memtrain::kernels {

// BERT input embeddings before LayerNorm: out[b,t,:] = word[ids[b,t]] + pos[t] +
// type[type_ids[b,t]]. Shapes: out [B, T, C]; ids, type_ids [B, T] (type_ids nullptr = all 0); word
// [V, C]; pos [P, C] (T <= P); type [TV, C]. Throws std::out_of_range naming (b, t) for an id
// outside [0, V) or a type id outside [0, TV); nothing is written then.
template <class Scalar>
void bert_embeddings_forward(Scalar* out, const std::int32_t* ids, const std::int32_t* type_ids,
                             const Scalar* word, const Scalar* pos, const Scalar* type, int B,
                             int T, int C, int V, int TV);

// Accumulates (+=) into dword [V, C], dpos [P, C], dtype [TV, C] (each may be nullptr to skip).
// dout [B, T, C]; ids, type_ids as in the forward pass (already validated there).
template <class Scalar>
void bert_embeddings_backward(NoDeduce<Scalar>* dword, NoDeduce<Scalar>* dpos,
                              NoDeduce<Scalar>* dtype, const Scalar* dout, const std::int32_t* ids,
                              const std::int32_t* type_ids, int B, int T, int C);

}  // namespace memtrain::kernels
