#pragma once
// Note [Deterministic column sums]
// Bias and LayerNorm parameter gradients are sums over the N rows of an [N, C] tensor. Atomics
// would make the sum's order (and so its rounding) differ from run to run, which breaks the
// bitwise claims of deterministic mode (issue 14). Instead a block of kColumns x kRowGroups
// threads owns kColumns columns: thread (x, y) sums rows y, y + kRowGroups, ... of column x, and
// the kRowGroups partial sums are added in y order. The order is fixed by the launch shape alone.
namespace memtrain::kernels::gpu {

inline constexpr int kColumns = 32;
inline constexpr int kRowGroups = 16;

// Adds the kRowGroups partials of this block's column threadIdx.x in y order; the result is
// valid in the threads with threadIdx.y == 0. Every thread of the block must call it.
__device__ __forceinline__ float reduce_row_groups(float partial, float (&shared)[kRowGroups][kColumns]) {
  shared[threadIdx.y][threadIdx.x] = partial;
  __syncthreads();
  float s = 0.0f;
  if (threadIdx.y == 0) {
    for (int y = 0; y < kRowGroups; ++y) s += shared[y][threadIdx.x];
  }
  __syncthreads();
  return s;
}

// Warp-wide sum by butterfly shuffles: every lane gets the same value, in the same order on
// every run.
__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

}  // namespace memtrain::kernels::gpu
