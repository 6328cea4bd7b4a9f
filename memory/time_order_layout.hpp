#pragma once
// The best-fit-in-time-order arena layout of plan_arena (activation_planner.hpp): O(n log n)
// whatever the number of tensors live together.
#include <cstddef>
#include <vector>

#include "memory/activation_planner.hpp"

namespace memtrain::memory::detail {

// Tensors in order of first use (larger first at equal times); each takes the smallest free
// range of the arena that holds it (the lowest of equal ones), or the top of the arena, which
// grows. A tensor's range is free again after its last use (neighbouring free ranges merge).
// sizes[i] is tensor i's aligned size (0: not placed, offset 0). Writes offsets (resized to n)
// and returns the arena bytes; adds its comparisons to `work`. Throws std::invalid_argument
// when the arena overflows std::size_t. Cost: O(n log n): a sort, then O(1) amortized
// operations on two ordered sets of free ranges per tensor.
std::size_t best_fit_in_time_order_layout(const std::vector<TensorLifetime>& lifetimes,
                                          const std::vector<std::size_t>& sizes, std::vector<std::size_t>& offsets,
                                          std::size_t& work);

}  // namespace memtrain::memory::detail
