#pragma once
// The median the benchmarks report (of repeats that alternate with each other).
#include <algorithm>
#include <vector>

namespace memtrain::bench {

// The middle value of v (the mean of the two middle ones for an even count); v non-empty.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace memtrain::bench
