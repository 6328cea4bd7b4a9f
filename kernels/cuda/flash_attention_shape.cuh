#pragma once
// What the flash-attention kernels share: the shape and dropout constants of one call, and the
// keep rule of attention's dropout. Included by flash_attention.cu and by the tensor-core
// kernels (flash_attention_mma.cu, flash_attention_mma_backward.cu).
#include <cstdint>

#include "kernels/cuda/dtype_traits.cuh"
#include "kernels/cuda/philox_device.cuh"

namespace memtrain::kernels::gpu::flash {

inline constexpr int kRows = 64;  // query rows (forward, dQ) or keys (dK, dV) per block: one per thread
inline constexpr int kTile = 32;  // keys (forward, dQ) or queries (dK, dV) staged in shared memory at once

struct Shape {
  int B, T, C, NH, HS;
  float scale, dropout_p, keep_scale;
  std::uint32_t threshold, k0, k1;
  std::uint64_t first_sample, first_element;  // first_element: first_head T T
};

// kernels/cpu/dropout.cpp's keep rule for element ((first_head + h) T + i) T + j of sample b.
__device__ __forceinline__ bool kept(const Shape& s, int b, int h, int i, int j) {
  const std::uint64_t e =
      s.first_element + (static_cast<std::uint64_t>(h) * s.T + i) * static_cast<std::uint64_t>(s.T) + j;
  const auto words = philox_block(s.k0, s.k1, s.first_sample + b, e >> 2);
  return (words[e & 3] & 0xffffff00u) >= s.threshold;
}

template <class T>
__device__ __forceinline__ bool attends(const T* key_mask, const Shape& s, int b, int j) {
  return key_mask == nullptr || to_float(key_mask[static_cast<long long>(b) * s.T + j]) != 0.0f;
}

}  // namespace memtrain::kernels::gpu::flash
