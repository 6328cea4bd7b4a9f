#pragma once
#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "memory/memory_resource.hpp"

namespace memtrain::memory {

// A quota on an upstream (RMM's limiting_resource_adaptor): allocations that would bring the
// bytes in use past `limit_bytes` fail with memtrain::OutOfMemory before the upstream is asked.
// Each allocation counts its size rounded up to its alignment (what it occupies upstream).
// A failure of the upstream leaves the count unchanged. Thread-safe (an atomic counter), if the
// upstream is.
class LimitResourceAdaptor final : public MemoryResource {
 public:
  // Throws std::invalid_argument for a null upstream.
  LimitResourceAdaptor(std::shared_ptr<MemoryResource> upstream, std::size_t limit_bytes);

  std::size_t limit_bytes() const { return limit_; }
  std::size_t used_bytes() const { return used_.load(std::memory_order_relaxed); }
  // The limit, or the upstream's capacity if that is smaller (and known).
  std::size_t capacity_bytes() const override;
  std::string name() const override;
  bool backs_memory() const override { return upstream_->backs_memory(); }
  MemoryResource& upstream() const { return *upstream_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, StreamId stream) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, StreamId stream) override;

  std::shared_ptr<MemoryResource> upstream_;
  std::size_t limit_;
  std::atomic<std::size_t> used_{0};
};

}  // namespace memtrain::memory
