#pragma once
// Static memory planning for a step whose tensor lifetimes are known in advance (a dry run,
// or a whole recorded trace): every tensor gets an offset in one arena.
#include <cstddef>
#include <vector>

namespace memtrain::memory {

// A tensor's size and the closed interval [first_use, last_use] of logical times (e.g. op or
// trace-event indices) during which it must stay live. first_use <= last_use.
struct TensorLifetime {
  std::size_t bytes = 0;
  std::size_t first_use = 0;
  std::size_t last_use = 0;
};

// Which layout plan_arena kept (Note [Two layouts, each at most O(n log n)] in
// activation_planner.cpp).
enum class ArenaLayout {
  greedy_by_size,          // largest first, best-fit gap among the tensors live with it
  best_fit_in_time_order,  // in order of first use, best-fit gap among the free ranges
};

struct ArenaPlan {
  std::vector<std::size_t> offsets;  // offsets[i] (bytes) for lifetimes[i], multiples of alignment
  std::size_t arena_bytes = 0;       // max over tensors of offset + aligned size
  // Largest sum of aligned sizes live at one time: no placement can use less (bytes).
  std::size_t lower_bound_bytes = 0;
  std::size_t peak_time = 0;  // a time at which the live set reaches lower_bound_bytes
  ArenaLayout layout = ArenaLayout::greedy_by_size;
  // The planner's work, counted rather than timed so tests can check its growth: comparisons
  // made by its sorts, searches and ordered sets, plus tree nodes and placed tensors visited.
  // About c * n log n for n tensors (never the number of overlapping pairs).
  std::size_t work = 0;
};

// Lays out `lifetimes` in one arena: two layouts, the smaller arena kept (ties: greedy by size).
//  - Greedy by size with best-fit offsets (Pisarchyk & Lee 2020, "Efficient Memory Management
//    for Deep Neural Net Inference", sec. 4.3): tensors in decreasing size; each goes into the
//    smallest gap between the already placed tensors whose lifetimes overlap its own, or above
//    them all. Its cost grows with the number of overlapping pairs, so it runs only when there
//    are at most kGreedyPairsPerTensor (below) pairs per tensor, counted beforehand.
//  - Best fit in time order: tensors by first use; each takes the smallest free range of the
//    arena that fits, the ranges of tensors past their last use being free again.
// Sizes are rounded up to `alignment` (a power of two; bytes == 0 takes no space, offset 0).
// Throws std::invalid_argument for first_use > last_use, an alignment that is not a power of
// two, 2^32 or more tensors, or sizes whose sum overflows.
// Cost: O(n log n) time and O(n) memory for n tensors (Note [Two layouts, each at most O(n log n)]).
ArenaPlan plan_arena(const std::vector<TensorLifetime>& lifetimes, std::size_t alignment = 256);

// The largest sum of sizes (rounded up to `alignment`) live at one time, and that time; work
// counts its comparisons. O(n log n). Throws as plan_arena does.
ArenaPlan live_set_lower_bound(const std::vector<TensorLifetime>& lifetimes, std::size_t alignment = 256);

// The greedy-by-size layout runs when the tensors of nonzero size overlap in at most this many
// pairs per tensor (its cost is O(n log n + pairs * log n)).
inline constexpr std::size_t kGreedyPairsPerTensor = 64;

}  // namespace memtrain::memory
