#pragma once
#include <cstdint>
namespace memtrain::kernels {

// BERT input embeddings before LayerNorm: out[b,t,:] = word[ids[b,t]] + pos[t] + type[type_ids[b,t]].
// Shapes: out [B, T, C]; ids, type_ids [B, T]; word [V, C]; pos [P, C] (T <= P); type [TV, C].
// Throws std::out_of_range for an id outside the table.
void bert_embeddings_forward(float* out, const std::int32_t* ids, const std::int32_t* type_ids,
                             const float* word, const float* pos, const float* type, int B, int T,
                             int C, int V, int TV);

// Accumulates (+=) into dword [V, C], dpos [P, C], dtype [TV, C]. dout [B, T, C].
void bert_embeddings_backward(float* dword, float* dpos, float* dtype, const float* dout,
                              const std::int32_t* ids, const std::int32_t* type_ids, int B, int T,
                              int C);

}  // namespace memtrain::kernels
