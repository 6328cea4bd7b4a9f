#include "memory/activation_planner.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
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
      throw std::invalid_argument("activation planner: tensor " + std::to_string(i) +
                                  " has first_use " + std::to_string(lifetimes[i].first_use) +
                                  " > last_use " + std::to_string(lifetimes[i].last_use));
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

  struct Placed {
    std::size_t offset, end, first_use, last_use;
  };
  std::vector<Placed> placed;
  placed.reserve(n);
  std::vector<std::pair<std::size_t, std::size_t>> busy;  // [offset, end) of overlapping tensors
  for (const std::size_t i : order) {
    const TensorLifetime& t = lifetimes[i];
    const std::size_t size = round_up(t.bytes, alignment);
    if (size == 0) continue;
    busy.clear();
    for (const auto& p : placed) {
      if (p.first_use <= t.last_use && t.first_use <= p.last_use) busy.emplace_back(p.offset, p.end);
    }
    std::sort(busy.begin(), busy.end());
    std::size_t best = kMax, best_gap = kMax, top = 0;
    for (const auto& [offset, end] : busy) {
      if (offset > top) {
        const std::size_t gap = offset - top;
        if (gap >= size && gap < best_gap) {
          best = top;
          best_gap = gap;
        }
      }
      top = std::max(top, end);
    }
    const std::size_t offset = best != kMax ? best : top;
    if (size > kMax - offset) {
      throw std::invalid_argument("activation planner: arena size overflows std::size_t");
    }
    plan.offsets[i] = offset;
    placed.push_back({offset, offset + size, t.first_use, t.last_use});
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
  }
  return plan;
}

}  // namespace memtrain::memory
