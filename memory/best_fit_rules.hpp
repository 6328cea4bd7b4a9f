#pragma once
// best_fit's rules for reusing a cached block, shared by best_fit_policy.cpp and
// vmm_stitch_policy.cpp (Note [best_fit: reserve only what is needed, reuse across streams]).
#include <cstddef>

#include "memory/allocation_policy.hpp"

namespace memtrain::memory {

// The may_serve and should_split of best_fit and vmm_stitch; they differ only in the least
// large-pool remainder worth splitting off. Sizes are bytes.
struct BestFitRules {
  // Requests wasting this much of an oversize block or more are not served from it (PyTorch's
  // kLargeBuffer).
  static constexpr std::size_t kOversizeWaste = std::size_t{20} << 20;
  // Every block is a multiple of it (the Allocator contract); a small-pool remainder this large
  // is split off.
  static constexpr std::size_t kAlignment = 256;

  // AllocatorOptions::max_split_size: blocks of at least this size are never split and serve
  // only requests of at least this size that waste less than kOversizeWaste of them.
  std::size_t max_split_size;
  // The least large-pool remainder that is split off; a smaller one stays attached to the block
  // and rejoins it when it is freed.
  std::size_t min_large_remainder;

  // May a free block of `block_size` serve a request of `rounded` (<= block_size)?
  bool may_serve(std::size_t block_size, std::size_t rounded) const {
    if (rounded < max_split_size && block_size >= max_split_size) return false;
    if (rounded >= max_split_size && block_size - rounded >= kOversizeWaste) return false;
    return true;
  }
  // Split a block of `block_size` from `pool` serving `rounded` (<= block_size), leaving the rest free?
  bool should_split(Pool pool, std::size_t block_size, std::size_t rounded) const {
    const std::size_t remaining = block_size - rounded;
    if (pool == Pool::small) return remaining >= kAlignment;
    return block_size < max_split_size && remaining >= min_large_remainder;
  }
};

}  // namespace memtrain::memory
