#pragma once
// The tensor-core forward pass of flash attention for 16-bit inputs and a head size of 64.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/flash_attention_shape.cuh"
#include "kernels/cuda/kernel_context.hpp"

namespace memtrain::kernels::gpu::flash {

// Whether forward_mma takes this call: T is __nv_bfloat16 or __half and HS == 64.
template <class T>
bool mma_forward_applies(const Shape& s);

// flash_attention_forward's contract (out [B, T, C] in T, lse [B, NH, T] in fp32) on tensor
// cores: per block 64 query rows in 4 warps of 16; each key tile of 64 gives S = Q K^T and
// O += P V as 16 x 16 x 16 WMMA products with fp32 accumulation; the online softmax of each row
// runs on two lanes of its warp. P is rounded to T before P V, as FlashAttention-2 does.
template <class T>
void forward_mma(const KernelContext& ctx, T* out, float* lse, const T* q, const T* k, const T* v,
                 const T* key_mask, const Shape& s);

}  // namespace memtrain::kernels::gpu::flash
