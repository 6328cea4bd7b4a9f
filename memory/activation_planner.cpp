#include "memory/activation_planner.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <cstdint>
#include <stdexcept>
#include <string>

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
  // Size changes at interval starts (+) and just after interval ends (-); ends sort first at
  // equal times because last_use + 1 is exclusive.
  std::map<std::size_t, std::pair<std::size_t, std::size_t>> delta;  // time -> (added, removed)
  for (const auto& t : lifetimes) {
    const std::size_t s = round_up(t.bytes, alignment);
    if (s == 0) continue;
    delta[t.first_use].first += s;
    if (t.last_use != kMax) delta[t.last_use + 1].second += s;
  }
  ArenaPlan plan;
  std::size_t live = 0;
  for (const auto& [time, change] : delta) {
    live -= change.second;
    if (change.first > kMax - live) {
      throw std::invalid_argument("activation planner: live bytes overflow std::size_t");
    }
    live += change.first;
    if (live > plan.lower_bound_bytes) {
      plan.lower_bound_bytes = live;
      plan.peak_time = time;
    }
  }
  return plan;
}

ArenaPlan plan_arena(const std::vector<TensorLifetime>& lifetimes, std::size_t alignment) {
  ArenaPlan plan = live_set_lower_bound(lifetimes, alignment);
  const std::size_t n = lifetimes.size();
  if (n >= UINT32_MAX) throw std::invalid_argument("activation planner: more than 2^32 - 1 tensors");
  plan.offsets.assign(n, 0);

  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  // Largest first; ties by earlier first use, which makes equal-size tensors an interval-graph
  // colouring in start order (optimal: the arena then equals the lower bound).
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto sa = round_up(lifetimes[a].bytes, alignment);
    const auto sb = round_up(lifetimes[b].bytes, alignment);
    if (sa != sb) return sa > sb;
    return lifetimes[a].first_use < lifetimes[b].first_use;
  });

  // Finding the placed tensors whose lifetimes overlap [a, b] must not scan every placed
  // tensor (traces have millions): those overlapping are the ones live at time a (a stabbing
  // query on a segment tree over the distinct times) plus those starting in (a, b] (an ordered
  // set by start). Each query costs O(log n + overlaps).
  std::vector<std::size_t> times;
  times.reserve(2 * n);
  for (const auto& t : lifetimes) {
    times.push_back(t.first_use);
    times.push_back(t.last_use);
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  const std::size_t m = times.size();
  auto coord = [&](std::size_t time) {
    return static_cast<std::size_t>(std::lower_bound(times.begin(), times.end(), time) - times.begin());
  };
  std::vector<std::vector<std::uint32_t>> covering(2 * m);   // bottom-up segment tree nodes
  std::set<std::pair<std::size_t, std::uint32_t>> by_start;  // (first_use coordinate, tensor)

  std::vector<std::size_t> end(n, 0);
  std::vector<std::pair<std::size_t, std::size_t>> busy;  // [offset, end) of overlapping tensors
  for (const std::size_t i : order) {
    const TensorLifetime& t = lifetimes[i];
    const std::size_t size = round_up(t.bytes, alignment);
    if (size == 0) continue;
    const std::size_t a = coord(t.first_use), b = coord(t.last_use);
    busy.clear();
    for (std::size_t node = a + m; node >= 1; node >>= 1) {
      for (const std::uint32_t j : covering[node]) busy.emplace_back(plan.offsets[j], end[j]);
    }
    for (auto it = by_start.upper_bound({a, UINT32_MAX}); it != by_start.end() && it->first <= b; ++it) {
      busy.emplace_back(plan.offsets[it->second], end[it->second]);
    }
    std::sort(busy.begin(), busy.end());
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
    plan.offsets[i] = offset;
    end[i] = offset + size;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    const auto id = static_cast<std::uint32_t>(i);
    for (std::size_t l = a + m, r = b + m + 1; l < r; l >>= 1, r >>= 1) {
      if (l & 1) covering[l++].push_back(id);
      if (r & 1) covering[--r].push_back(id);
    }
    by_start.emplace(a, id);
  }
  return plan;
}

}  // namespace memtrain::memory
