#pragma once
// The greedy-by-size arena layout of plan_arena (activation_planner.hpp), exact but costly
// when many tensors are live together.
#include <cstddef>
#include <vector>

#include "memory/activation_planner.hpp"

namespace memtrain::memory::detail {

// Greedy by size with best-fit offsets (Pisarchyk & Lee 2020, sec. 4.3). sizes[i] is tensor i's
// aligned size (0: not placed, offset 0). Writes offsets (resized to n) and returns the arena
// bytes; adds its comparisons and visits to `work`. Throws std::invalid_argument when an
// offset overflows std::size_t. Cost: O(n log n + P log n) for P overlapping pairs of nonzero
// tensors: every placed tensor that overlaps the one being placed is visited once.
std::size_t greedy_by_size_layout(const std::vector<TensorLifetime>& lifetimes, const std::vector<std::size_t>& sizes,
                                  std::vector<std::size_t>& offsets, std::size_t& work);

// The number of pairs of tensors of nonzero size whose lifetimes overlap, the cost driver of
// greedy_by_size_layout. O(n log n): all pairs minus those where one ends before the other starts.
std::size_t overlapping_pairs(const std::vector<TensorLifetime>& lifetimes, const std::vector<std::size_t>& sizes,
                              std::size_t& work);

}  // namespace memtrain::memory::detail
