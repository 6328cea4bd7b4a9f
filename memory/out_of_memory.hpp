#pragma once
// The error every memory resource and allocator throws when a request cannot be served.
#include <cstddef>
#include <stdexcept>
#include <string>

namespace memtrain {

// Thrown by memory resources and allocators when a request cannot be served. The message is
// one line: what was requested, the capacity, free, allocated and reserved-but-unallocated bytes,
// the largest free block, and a hint (see CachingAllocator). The thrower stays consistent and
// usable after throwing. `requested_bytes` is the size of the request that failed.
class OutOfMemory : public std::runtime_error {
 public:
  explicit OutOfMemory(const std::string& message, std::size_t requested_bytes = 0)
      : std::runtime_error(message), requested_bytes_(requested_bytes) {}
  std::size_t requested_bytes() const noexcept { return requested_bytes_; }

 private:
  std::size_t requested_bytes_;
};

}  // namespace memtrain
