#pragma once
// BERT's embeddings on the GPU: the CUDA twin of bert_embeddings_forward / backward in
// kernels/cpu/embedding.hpp.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/kernel_context.hpp"

namespace memtrain::kernels::gpu {

// out [B, T, C] = word[ids] + pos[t] + type[type_ids] (added in that order, as on the CPU).
// ids, type_ids [B, T] (device memory; type_ids may be nullptr: type 0); word [V, C],
// pos [>= T, C], type [TV, C]. Checks the ids first (synchronizing ctx.stream) and throws
// std::out_of_range naming the first bad position and value; nothing is written then.
// Needs 8 bytes of ctx.scratch.
template <class T>
void bert_embeddings_forward(const KernelContext& ctx, T* out, const std::int32_t* ids, const std::int32_t* type_ids,
                             const T* word, const T* pos, const T* type, int B, int T_, int C, int V, int TV);

// Accumulates (+=) dword [V, C], dpos [T, C], dtype [TV, C] (each may be nullptr) from dout
// [B, T, C]. One thread per column walks the B T rows in order and adds each row into the table
// rows its ids name: repeated ids never race and the sums come out in the same order on every
// run (deterministic, no atomics), the CPU's column-block scheme. fp32 only: 16-bit tables take
// their gradients through an fp32 buffer.
void bert_embeddings_backward(const KernelContext& ctx, float* dword, float* dpos, float* dtype, const float* dout,
                              const std::int32_t* ids, const std::int32_t* type_ids, int B, int T_, int C);

}  // namespace memtrain::kernels::gpu
