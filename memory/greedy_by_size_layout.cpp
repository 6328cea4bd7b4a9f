#include "memory/greedy_by_size_layout.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <stdexcept>
#include <utility>

#include "memory/planner_work.hpp"

namespace memtrain::memory::detail {

std::size_t overlapping_pairs(const std::vector<TensorLifetime>& lifetimes, const std::vector<std::size_t>& sizes,
                              std::size_t& work) {
  std::vector<std::size_t> starts;
  for (std::size_t i = 0; i < lifetimes.size(); ++i) {
    if (sizes[i] != 0) starts.push_back(lifetimes[i].first_use);
  }
  std::sort(starts.begin(), starts.end(), counting(work, std::less<>{}));
  const std::size_t m = starts.size();
  // Two closed intervals are disjoint exactly when one ends before the other starts, and then
  // only one of them does: each disjoint pair is counted once, by the one that ends first.
  std::size_t disjoint = 0;
  for (std::size_t i = 0; i < lifetimes.size(); ++i) {
    if (sizes[i] == 0) continue;
    const auto later =
        std::upper_bound(starts.begin(), starts.end(), lifetimes[i].last_use, counting(work, std::less<>{}));
    disjoint += static_cast<std::size_t>(starts.end() - later);
  }
  return m * (m - 1) / 2 - disjoint;  // m < 2^32 (checked by plan_arena), so no overflow
}

std::size_t greedy_by_size_layout(const std::vector<TensorLifetime>& lifetimes, const std::vector<std::size_t>& sizes,
                                  std::vector<std::size_t>& offsets, std::size_t& work) {
  constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
  const std::size_t n = lifetimes.size();
  offsets.assign(n, 0);
  std::vector<std::uint32_t> order;
  for (std::size_t i = 0; i < n; ++i) {
    if (sizes[i] != 0) order.push_back(static_cast<std::uint32_t>(i));
  }
  // Largest first; ties by earlier first use, which makes equal-size tensors an interval-graph
  // colouring in start order (optimal: the arena then equals the lower bound).
  std::stable_sort(order.begin(), order.end(), counting(work, [&](std::uint32_t a, std::uint32_t b) {
                     if (sizes[a] != sizes[b]) return sizes[a] > sizes[b];
                     return lifetimes[a].first_use < lifetimes[b].first_use;
                   }));

  // Finding the placed tensors whose lifetimes overlap [a, b] must not scan every placed
  // tensor: those overlapping are the ones live at time a (a stabbing query on a segment tree
  // over the distinct times) plus those starting in (a, b] (an ordered set by start). Each
  // query costs O(log n + overlaps).
  std::vector<std::size_t> times;
  times.reserve(2 * order.size());
  for (const std::uint32_t i : order) {
    times.push_back(lifetimes[i].first_use);
    times.push_back(lifetimes[i].last_use);
  }
  std::sort(times.begin(), times.end(), counting(work, std::less<>{}));
  times.erase(std::unique(times.begin(), times.end()), times.end());
  const std::size_t m = times.size();
  auto coord = [&](std::size_t time) {
    return static_cast<std::size_t>(std::lower_bound(times.begin(), times.end(), time, counting(work, std::less<>{})) -
                                    times.begin());
  };
  std::vector<std::vector<std::uint32_t>> covering(2 * m);  // bottom-up segment tree nodes
  using StartKey = std::pair<std::size_t, std::uint32_t>;   // (first_use coordinate, tensor)
  std::set<StartKey, CountingLess<std::less<>>> by_start(counting(work, std::less<>{}));

  std::size_t arena = 0;
  std::vector<std::size_t> end(n, 0);
  std::vector<std::pair<std::size_t, std::size_t>> busy;  // [offset, end) of overlapping tensors
  for (const std::uint32_t i : order) {
    const std::size_t size = sizes[i];
    const std::size_t a = coord(lifetimes[i].first_use), b = coord(lifetimes[i].last_use);
    busy.clear();
    for (std::size_t node = a + m; node >= 1; node >>= 1) {
      ++work;
      for (const std::uint32_t j : covering[node]) busy.emplace_back(offsets[j], end[j]);
    }
    for (auto it = by_start.upper_bound(StartKey{a, UINT32_MAX}); it != by_start.end() && it->first <= b; ++it) {
      busy.emplace_back(offsets[it->second], end[it->second]);
    }
    work += busy.size();
    std::sort(busy.begin(), busy.end(), counting(work, std::less<>{}));
    std::size_t best = kMax, best_gap = kMax, top = 0;
    for (const auto& [offset, stop] : busy) {
      if (offset > top) {
        const std::size_t gap = offset - top;
        if (gap >= size && gap < best_gap) {
          best = top;
          best_gap = gap;
        }
      }
      top = std::max(top, stop);
    }
    const std::size_t offset = best != kMax ? best : top;
    if (size > kMax - offset) {
      throw std::invalid_argument("activation planner: arena size overflows std::size_t");
    }
    offsets[i] = offset;
    end[i] = offset + size;
    arena = std::max(arena, offset + size);
    for (std::size_t l = a + m, r = b + m + 1; l < r; l >>= 1, r >>= 1) {
      ++work;
      if (l & 1) covering[l++].push_back(i);
      if (r & 1) covering[--r].push_back(i);
    }
    by_start.emplace(a, i);
  }
  return arena;
}

}  // namespace memtrain::memory::detail
