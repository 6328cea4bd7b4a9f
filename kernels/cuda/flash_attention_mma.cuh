#pragma once
// The tensor-core forward pass of flash attention for 16-bit inputs and a head size of 64.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/flash_attention_shape.cuh"
#include "kernels/cuda/kernel_context.hpp"

namespace memtrain::kernels::gpu::flash {

// The tiles of the tensor-core kernels: head size 64, 16-bit rows padded to 72 elements and
// fp32 rows to 68 (WMMA wants multiples of 8 and 4; the padding moves each row off the
// previous one's shared-memory banks).
inline constexpr int kMmaHeadSize = 64;
inline constexpr int kMmaLd16 = kMmaHeadSize + 8;
inline constexpr int kMmaLd32 = kMmaHeadSize + 4;

// Whether forward_mma takes this call: T is __nv_bfloat16 or __half and HS == 64.
template <class T>
bool mma_forward_applies(const Shape& s);

// flash_attention_forward's contract (out [B, T, C] in T, lse [B, NH, T] in fp32) on tensor
// cores: per block 64 query rows in 4 warps of 16; each key tile of 64 gives S = Q K^T and
// O += P V as 16 x 16 x 16 WMMA products with fp32 accumulation; the online softmax of each row
// runs on two lanes of its warp. P is rounded to T before P V, as FlashAttention-2 does.
template <class T>
void forward_mma(const KernelContext& ctx, T* out, float* lse, const T* q, const T* k, const T* v, const T* key_mask,
                 const Shape& s);

// flash_attention_backward's contract (dq, dk, dv [B, T, C] accumulated) on tensor cores, for
// the calls mma_forward_applies takes: FlashAttention-2's backward (Dao 2023, Algorithm 2) in
// two kernels without atomics. One gives dK and dV for 64 keys a block (16 a warp), walking the
// query tiles: S^T = K Q^T and dP^T = V dO^T, then dV += (Z P)^T dO and dK += dS^T Q with the
// WMMA accumulators held across the walk; the other gives dQ for 64 queries a block, walking
// the key tiles: dQ += dS K. P and dS are rounded to T before their products, as
// FlashAttention-2 does.
template <class T>
void backward_mma(const KernelContext& ctx, T* dq, T* dk, T* dv, const T* dout, const T* out, const float* lse,
                  const T* q, const T* k, const T* v, const T* key_mask, const Shape& s);

}  // namespace memtrain::kernels::gpu::flash
