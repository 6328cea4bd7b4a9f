#include "memory/time_order_layout.hpp"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <utility>

#include "memory/planner_work.hpp"

namespace memtrain::memory::detail {

std::size_t best_fit_in_time_order_layout(const std::vector<TensorLifetime>& lifetimes,
                                          const std::vector<std::size_t>& sizes, std::vector<std::size_t>& offsets,
                                          std::size_t& work) {
  constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
  const std::size_t n = lifetimes.size();
  offsets.assign(n, 0);
  std::vector<std::uint32_t> by_first, by_last;
  for (std::size_t i = 0; i < n; ++i) {
    if (sizes[i] != 0) by_first.push_back(static_cast<std::uint32_t>(i));
  }
  by_last = by_first;
  // At equal first use the larger tensor goes first: it has fewer ranges to choose from.
  std::sort(by_first.begin(), by_first.end(), counting(work, [&](std::uint32_t a, std::uint32_t b) {
              if (lifetimes[a].first_use != lifetimes[b].first_use)
                return lifetimes[a].first_use < lifetimes[b].first_use;
              if (sizes[a] != sizes[b]) return sizes[a] > sizes[b];
              return a < b;
            }));
  std::sort(by_last.begin(), by_last.end(), counting(work, [&](std::uint32_t a, std::uint32_t b) {
              return lifetimes[a].last_use < lifetimes[b].last_use;
            }));

  // Free ranges below the arena's top, twice: by offset (to merge neighbours when a range is
  // freed) and by (size, offset) (the best fit: smallest that holds the tensor, lowest first).
  using Range = std::pair<std::size_t, std::size_t>;
  std::map<std::size_t, std::size_t, CountingLess<std::less<>>> free_at(
      counting(work, std::less<>{}));                                                      // offset -> end
  std::set<Range, CountingLess<std::less<>>> free_by_size(counting(work, std::less<>{}));  // (size, offset)
  auto add_free = [&](std::size_t begin, std::size_t stop) {
    free_at.emplace(begin, stop);
    free_by_size.emplace(stop - begin, begin);
  };
  auto remove_free = [&](decltype(free_at)::iterator it) {
    free_by_size.erase(Range{it->second - it->first, it->first});
    return free_at.erase(it);
  };
  auto release = [&](std::uint32_t j) {
    std::size_t begin = offsets[j], stop = begin + sizes[j];
    auto next = free_at.lower_bound(stop);
    if (next != free_at.end() && next->first == stop) {
      stop = next->second;
      next = remove_free(next);
    }
    if (next != free_at.begin()) {
      const auto prev = std::prev(next);
      if (prev->second == begin) {
        begin = prev->first;
        remove_free(prev);
      }
    }
    add_free(begin, stop);
  };

  std::size_t arena = 0, retired = 0;
  for (const std::uint32_t i : by_first) {
    // Closed lifetimes: a tensor whose last use is before this first use has its range back.
    while (retired < by_last.size() && lifetimes[by_last[retired]].last_use < lifetimes[i].first_use) {
      release(by_last[retired++]);
    }
    const std::size_t size = sizes[i];
    std::size_t offset;
    if (const auto fit = free_by_size.lower_bound(Range{size, 0}); fit != free_by_size.end()) {
      const auto [gap, begin] = *fit;
      offset = begin;
      remove_free(free_at.find(begin));
      if (gap > size) add_free(begin + size, begin + gap);
    } else {
      // No range holds it: it goes on top, starting in the free range just below the top if any.
      offset = arena;
      if (!free_at.empty() && std::prev(free_at.end())->second == arena) {
        offset = std::prev(free_at.end())->first;
        remove_free(std::prev(free_at.end()));
      }
      if (size > kMax - offset) {
        throw std::invalid_argument("activation planner: arena size overflows std::size_t");
      }
      arena = offset + size;
    }
    offsets[i] = offset;
  }
  return arena;
}

}  // namespace memtrain::memory::detail
