#pragma once
// Allocator statistics, named as PyTorch's torch.cuda.memory_stats() names them.
#include <cstddef>
#include <cstdint>
#include <map>

#include "memory/types.hpp"

namespace memtrain::memory {

// The largest request and device size the allocators take, 4 EiB: the counters below are
// signed 64-bit (as PyTorch's memory_stats are), and a request near 2^64 bytes used to wrap
// them (a replay reported it as served with 0 B allocated). More than any device holds.
inline constexpr std::size_t kLargestAllocatorBytes = std::size_t{1} << 62;

// current / peak / cumulative allocated / cumulative freed, in bytes (or counts).
struct StatCounter {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t allocated = 0;
  std::int64_t freed = 0;
};

// One tag's share of the allocator's counters (bytes): what the blocks of that tag (parameter,
// gradient, activation, ...) hold, so a snapshot can say which kind of tensor filled the memory.
struct TagStats {
  StatCounter allocated_bytes;
  StatCounter active_bytes;
  StatCounter requested_bytes;
};

// An allocator's byte counters at one moment, without the rest of MemoryStats (cheap enough to
// read after every event of a multi-job replay). Bytes. releasable_bytes: reserved bytes in
// segments that hold no block, which empty_cache() returns to the upstream (reserved - active -
// inactive split; expandable segments' free tails are not counted).
struct MemoryUsage {
  std::size_t allocated_bytes = 0;
  std::size_t reserved_bytes = 0;
  std::size_t releasable_bytes = 0;
};

struct MemoryStats {
  StatCounter allocated_bytes;       // bytes in blocks handed to callers (after rounding)
  StatCounter reserved_bytes;        // bytes obtained from the upstream (segments)
  StatCounter active_bytes;          // allocated + freed blocks still in use by another stream
  StatCounter inactive_split_bytes;  // free bytes inside split segments (not releasable)
  StatCounter requested_bytes;       // bytes callers asked for (before rounding)
  std::int64_t num_alloc_retries = 0;
  std::int64_t num_ooms = 0;
  std::int64_t num_device_alloc = 0;
  std::int64_t num_device_free = 0;
  // 1 - largest free block / total free bytes inside reserved segments (0 when nothing is free).
  double fragmentation = 0.0;
  double fragmentation_at_peak_reserved = 0.0;
  // peak allocated / peak reserved (0 when nothing was reserved).
  double utilization = 0.0;
  std::map<TagId, TagStats> per_tag;
};

}  // namespace memtrain::memory
