#pragma once
// Allocator statistics, named as PyTorch's torch.cuda.memory_stats() names them.
#include <cstdint>
#include <map>

#include "memory/types.hpp"

namespace memtrain::memory {

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
