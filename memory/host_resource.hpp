#pragma once
#include <cstddef>
#include <string>

#include "memory/memory_resource.hpp"

namespace memtrain::memory {

// Aligned host memory: the upstream of CPU training. Alignment is max(requested, 256 by
// default): every alignment that is a power of two works. With huge_pages, allocations of
// kHugePageBytes (2 MiB) or more are mapped in transparent huge pages (memory/huge_pages.hpp,
// Note [Transparent huge pages for host memory]): whole 2 MiB pages, 2 MiB aligned; smaller ones,
// and every one without huge_pages, come from the C++ aligned operator new.
// Unbounded (capacity_bytes() == 0). Throws memtrain::OutOfMemory when the system refuses,
// std::invalid_argument for an alignment that is not a power of two. Thread-safe.
class HostResource final : public MemoryResource {
 public:
  explicit HostResource(std::size_t min_alignment = 256, bool huge_pages = false);
  std::string name() const override { return "host"; }
  bool huge_pages() const { return huge_pages_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, StreamId stream) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, StreamId stream) override;
  std::size_t min_alignment_;
  bool huge_pages_;
};

}  // namespace memtrain::memory
