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

struct ArenaPlan {
  std::vector<std::size_t> offsets;  // offsets[i] (bytes) for lifetimes[i], multiples of alignment
  std::size_t arena_bytes = 0;       // max over tensors of offset + aligned size
  // Largest sum of aligned sizes live at one time: no placement can use less (bytes).
  std::size_t lower_bound_bytes = 0;
  std::size_t peak_time = 0;  // a time at which the live set reaches lower_bound_bytes
};

// Greedy by size with best-fit offsets (Pisarchyk & Lee 2020, "Efficient Memory Management for
// Deep Neural Net Inference", sec. 4.3, "Greedy by Size for Offset Calculation"): tensors in
// decreasing size; each goes into the smallest gap between the already placed tensors whose
// lifetimes overlap its own, or above them all when no gap fits. Sizes are rounded up to
// `alignment` (a power of two; bytes == 0 takes no space). Throws std::invalid_argument for
// first_use > last_use, an alignment that is not a power of two, or sizes whose sum overflows.
// Cost: O(n log n + total overlaps) for n tensors (an interval index finds the overlapping ones).
ArenaPlan plan_arena(const std::vector<TensorLifetime>& lifetimes, std::size_t alignment = 256);

// The largest sum of sizes (rounded up to `alignment`) live at one time, and that time.
ArenaPlan live_set_lower_bound(const std::vector<TensorLifetime>& lifetimes, std::size_t alignment = 256);

}  // namespace memtrain::memory
