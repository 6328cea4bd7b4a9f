#pragma once
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include "memory/memory_resource.hpp"
#include "memory/memory_stats.hpp"

namespace memtrain::memory {

// Counts what passes through to an upstream (RMM's statistics_resource_adaptor), at the resource
// level: bytes and number of live allocations, each with current / peak / allocated (total
// increases) / freed (total decreases), as in memory_stats.hpp. Bytes are the sizes callers
// passed. Failed upstream allocations count nothing. Thread-safe (a mutex), if the upstream is.
class StatisticsResourceAdaptor final : public MemoryResource {
 public:
  struct Counters {
    StatCounter bytes;
    StatCounter allocations;
  };

  // Throws std::invalid_argument for a null upstream.
  explicit StatisticsResourceAdaptor(std::shared_ptr<MemoryResource> upstream);

  Counters counters() const;
  // Peaks become the current values.
  void reset_peaks();
  std::size_t capacity_bytes() const override { return upstream_->capacity_bytes(); }
  std::string name() const override { return upstream_->name(); }
  bool backs_memory() const override { return upstream_->backs_memory(); }
  MemoryResource& upstream() const { return *upstream_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, StreamId stream) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, StreamId stream) override;

  std::shared_ptr<MemoryResource> upstream_;
  mutable std::mutex mutex_;
  Counters counters_;
};

}  // namespace memtrain::memory
