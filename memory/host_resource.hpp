#pragma once
#include <cstddef>
#include <string>

#include "memory/memory_resource.hpp"

namespace memtrain::memory {

// Aligned host memory from the C++ aligned operator new: the upstream of CPU training.
// Alignment is max(requested, 256 by default): every alignment that is a power of two works.
// Unbounded (capacity_bytes() == 0). Throws memtrain::OutOfMemory when the system refuses,
// std::invalid_argument for an alignment that is not a power of two. Thread-safe.
class HostResource final : public MemoryResource {
 public:
  explicit HostResource(std::size_t min_alignment = 256);
  std::string name() const override { return "host"; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, StreamId stream) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, StreamId stream) override;
  std::size_t min_alignment_;
};

}  // namespace memtrain::memory
