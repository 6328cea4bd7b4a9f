#include "memory/activation_planner.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "memory/greedy_by_size_layout.hpp"
#include "memory/planner_work.hpp"
#include "memory/time_order_layout.hpp"

namespace memtrain::memory {
namespace {

constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();

std::size_t round_up(std::size_t bytes, std::size_t alignment) {
  if (bytes > kMax - (alignment - 1)) {
    throw std::invalid_argument("activation planner: tensor of " + std::to_string(bytes) +
                                " bytes overflows when aligned to " + std::to_string(alignment));
  }
  return (bytes + alignment - 1) & ~(alignment - 1);
}

void check(const std::vector<TensorLifetime>& lifetimes, std::size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    throw std::invalid_argument("activation planner: alignment " + std::to_string(alignment) +
                                " is not a power of two");
  }
  for (std::size_t i = 0; i < lifetimes.size(); ++i) {
    if (lifetimes[i].first_use > lifetimes[i].last_use) {
      throw std::invalid_argument("activation planner: tensor " + std::to_string(i) + " has first_use " +
                                  std::to_string(lifetimes[i].first_use) + " > last_use " +
                                  std::to_string(lifetimes[i].last_use));
    }
  }
}

}  // namespace

ArenaPlan live_set_lower_bound(const std::vector<TensorLifetime>& lifetimes, std::size_t alignment) {
  check(lifetimes, alignment);
  // Size changes at interval starts (+) and just after interval ends (-). A change at time t
  // is (t, removed?, bytes); at equal times removals sort first because last_use + 1 is
  // exclusive, so the live sum never counts a tensor past its last use.
  struct Change {
    std::size_t time;
    bool added;
    std::size_t bytes;
  };
  std::vector<Change> changes;
  changes.reserve(2 * lifetimes.size());
  for (const auto& t : lifetimes) {
    const std::size_t s = round_up(t.bytes, alignment);
    if (s == 0) continue;
    changes.push_back({t.first_use, true, s});
    if (t.last_use != kMax) changes.push_back({t.last_use + 1, false, s});
  }
  ArenaPlan plan;
  std::sort(changes.begin(), changes.end(), detail::counting(plan.work, [](const Change& a, const Change& b) {
              return a.time != b.time ? a.time < b.time : (!a.added && b.added);
            }));
  std::size_t live = 0;
  for (std::size_t k = 0; k < changes.size();) {
    // All changes at one time together: the peak is the live sum between two distinct times.
    const std::size_t time = changes[k].time;
    for (; k < changes.size() && changes[k].time == time; ++k) {
      if (!changes[k].added) {
        live -= changes[k].bytes;
      } else {
        if (changes[k].bytes > kMax - live) {
          throw std::invalid_argument("activation planner: live bytes overflow std::size_t");
        }
        live += changes[k].bytes;
      }
    }
    if (live > plan.lower_bound_bytes) {
      plan.lower_bound_bytes = live;
      plan.peak_time = time;
    }
  }
  return plan;
}

// Note [Two layouts, each at most O(n log n)]
// Greedy by size (Pisarchyk & Lee) places each tensor after looking at every placed tensor
// whose lifetime overlaps its own, so its cost grows with the overlapping pairs, not with n:
// 10^4 blocks live together are 5 * 10^7 pairs, and `memtrain replay --policy planned` took
// seconds at 10^4 live blocks and minutes at 10^5 (issue 48). Its best-fit gap is a query on
// the free space of a whole time window (every time point's free ranges intersected), which
// no cheap index answers. So plan_arena first counts the pairs, in O(n log n), and runs greedy
// by size only when they are at most kGreedyPairsPerTensor per tensor: it then costs
// O(n log n + pairs * log n) = O(n log n). Best fit in time order always runs, in O(n log n):
// an allocator's best fit with a free list that knows no segments or rounding, which a sweep
// over time answers with two ordered sets of free ranges. The smaller arena is kept, greedy
// by size on a tie, so:
//  - wherever greedy by size runs (every input of the planner's and the replay's tests: at
//    most 47 pairs per tensor, in LargeInputsStayDisjoint's 40k tensors), the arena is
//    never larger than before this change, and the offsets are the old ones unless best fit
//    in time order found a strictly smaller arena;
//  - with more overlapping pairs, the layout is best fit in time order. With n blocks all live
//    together (issue 48's traces) any valid layout stacks them, and both reach the lower bound.
//    On bench_allocator's BERT-Large training trace (11.2k tensors, 1.2k pairs per tensor:
//    parameters and optimizer states live throughout) greedy by size is 0.4 % to 0.7 % tighter
//    (13.50 GiB against 13.56 to 13.60 GiB, lower bound 13.48 GiB; bench_activation_planner):
//    the price of a plan in milliseconds instead of seconds. Both stay above the lower bound,
//    which plan_arena reports beside them.
ArenaPlan plan_arena(const std::vector<TensorLifetime>& lifetimes, std::size_t alignment) {
  ArenaPlan plan = live_set_lower_bound(lifetimes, alignment);
  const std::size_t n = lifetimes.size();
  if (n >= UINT32_MAX) throw std::invalid_argument("activation planner: more than 2^32 - 1 tensors");
  std::vector<std::size_t> sizes(n);
  std::size_t placed = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sizes[i] = round_up(lifetimes[i].bytes, alignment);
    placed += sizes[i] != 0;
  }
  plan.arena_bytes = detail::best_fit_in_time_order_layout(lifetimes, sizes, plan.offsets, plan.work);
  plan.layout = ArenaLayout::best_fit_in_time_order;
  if (detail::overlapping_pairs(lifetimes, sizes, plan.work) <= kGreedyPairsPerTensor * placed) {
    std::vector<std::size_t> offsets;
    const std::size_t arena = detail::greedy_by_size_layout(lifetimes, sizes, offsets, plan.work);
    if (arena <= plan.arena_bytes) {
      plan.offsets = std::move(offsets);
      plan.arena_bytes = arena;
      plan.layout = ArenaLayout::greedy_by_size;
    }
  }
  return plan;
}

}  // namespace memtrain::memory
