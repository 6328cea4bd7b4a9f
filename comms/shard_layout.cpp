#include "comms/shard_layout.hpp"

#include <algorithm>
#include <climits>
#include <string>

#include "runtime/core/errors.hpp"

namespace memtrain::comms {

std::vector<std::int64_t> shard_counts(std::int64_t n, int ranks) {
  if (n < 0 || ranks < 1) {
    throw RuntimeError("shard_counts: " + std::to_string(n) + " elements over " + std::to_string(ranks) +
                       " ranks; expected n >= 0 and ranks >= 1");
  }
  const std::int64_t s = (n + ranks - 1) / ranks;
  std::vector<std::int64_t> counts(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    counts[static_cast<std::size_t>(r)] = std::clamp<std::int64_t>(n - r * s, 0, s);
  }
  return counts;
}

std::int64_t shard_offset(const std::vector<std::int64_t>& counts, int rank) {
  std::int64_t offset = 0;
  for (int r = 0; r < rank; ++r) offset += counts[static_cast<std::size_t>(r)];
  return offset;
}

void check_block_counts(const std::vector<std::int64_t>& counts, int size, const char* what) {
  if (static_cast<int>(counts.size()) != size) {
    throw RuntimeError(std::string(what) + ": " + std::to_string(counts.size()) + " block counts for a group of " +
                       std::to_string(size) + " ranks");
  }
  for (std::int64_t c : counts) {
    if (c < 0 || c > INT_MAX) {
      throw RuntimeError(std::string(what) + ": a block of " + std::to_string(c) + " elements; expected 0 to " +
                         std::to_string(INT_MAX));
    }
  }
}

}  // namespace memtrain::comms
