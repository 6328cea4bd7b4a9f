#pragma once
// Philox4x32-10 in device code: Random123's own generator (Salmon et al. 2011), which supports
// CUDA, so the words are those of kernels/philox.hpp's PhiloxStream::block.
#include <Random123/philox.h>

#include <cstdint>

namespace memtrain::kernels::gpu {

// The 4 words of block `block` (elements 4 block .. 4 block + 3) of `sample` under the derived
// key (PhiloxStream::key_words): the counter layout of PhiloxStream::block.
__device__ __forceinline__ r123::Philox4x32::ctr_type philox_block(std::uint32_t k0, std::uint32_t k1,
                                                                   std::uint64_t sample, std::uint64_t block) {
  const r123::Philox4x32::ctr_type ctr = {{static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32),
                                           static_cast<std::uint32_t>(sample),
                                           static_cast<std::uint32_t>(sample >> 32)}};
  const r123::Philox4x32::key_type key = {{k0, k1}};
  return r123::Philox4x32()(ctr, key);
}

}  // namespace memtrain::kernels::gpu
