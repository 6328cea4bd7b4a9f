#pragma once
// The one place where allocator counters change (PyTorch's memory_stats names, memory_stats.hpp).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "memory/memory_stats.hpp"
#include "memory/types.hpp"

namespace memtrain::memory {

// Not thread-safe: the allocator calls it under its lock. Every counter has current / peak /
// allocated (sum of increases) / freed (sum of decreases), in bytes.
class StatsRecorder {
 public:
  // A block of `size` bytes (requested: what the caller asked for) handed to a caller.
  void block_allocated(std::size_t size, std::size_t requested, TagId tag);
  // The caller freed it: no longer allocated; still active until its streams are done.
  void block_freed(std::size_t size, std::size_t requested, TagId tag);
  // The block is back in the cache (all streams done).
  void block_inactive(std::size_t size, TagId tag);
  void segment_reserved(std::size_t bytes);
  void segment_released(std::size_t bytes);
  // Free bytes inside segments that also hold other blocks (not releasable).
  void inactive_split_added(std::size_t bytes);
  void inactive_split_removed(std::size_t bytes);
  void alloc_retry() { ++stats_.num_alloc_retries; }
  void oom() { ++stats_.num_ooms; }
  // True when reserved bytes just reached a new peak (the caller then records fragmentation).
  bool at_peak_reserved() const { return stats_.reserved_bytes.current == stats_.reserved_bytes.peak && peak_is_new_; }
  void record_fragmentation_at_peak(double fragmentation) {
    stats_.fragmentation_at_peak_reserved = fragmentation;
    peak_is_new_ = false;
  }

  // Peaks become the current values (torch.cuda.reset_peak_memory_stats).
  void reset_peaks();
  const StatCounter& allocated() const { return stats_.allocated_bytes; }
  const StatCounter& reserved() const { return stats_.reserved_bytes; }
  const StatCounter& active() const { return stats_.active_bytes; }
  const StatCounter& inactive_split() const { return stats_.inactive_split_bytes; }
  // The full stats; fragmentation from the allocator's free-block view at this moment.
  MemoryStats snapshot(std::size_t largest_free, std::size_t total_free) const;

 private:
  TagStats& tag(TagId id);
  MemoryStats stats_;
  std::vector<TagStats> per_tag_;  // by TagId; converted to the map in snapshot()
  bool peak_is_new_ = false;
};

// 1 - largest / total, 0 when total == 0 (design.md's fragmentation).
double fragmentation(std::size_t largest_free, std::size_t total_free);

}  // namespace memtrain::memory
