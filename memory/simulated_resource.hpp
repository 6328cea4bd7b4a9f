#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "memory/memory_resource.hpp"

namespace memtrain::memory {

// Hands out addresses from a simulated device without touching memory, so a dry run can plan an
// 80 GiB GPU on a laptop. Addresses start at a fixed, page-aligned base far from real heap
// addresses and are first-fit in an address-ordered free list, so the same sequence of calls
// gives the same addresses (traces of dry runs are reproducible). Fails with
// memtrain::OutOfMemory when the bytes in use would exceed `capacity_bytes` (address space is
// never the limit). Deallocating a pointer it did not hand out throws std::invalid_argument.
// Thread-safe.
class SimulatedResource final : public MemoryResource {
 public:
  SimulatedResource(std::size_t capacity_bytes, std::string name = "simulated");
  std::size_t capacity_bytes() const override { return capacity_; }
  // capacity - used: what a GPU's cudaMemGetInfo would call free, whoever took the rest.
  std::size_t available_bytes() const override { return capacity_ - std::min(capacity_, used_bytes()); }
  std::string name() const override { return name_; }
  bool backs_memory() const override { return false; }
  // Bytes currently handed out (each allocation counted at its requested size, aligned up).
  std::size_t used_bytes() const;

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, StreamId stream) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, StreamId stream) override;

  std::size_t capacity_;
  std::string name_;
  mutable std::mutex mutex_;
  std::size_t used_ = 0;
  std::uintptr_t next_ = 0;                      // bump pointer for fresh addresses
  std::map<std::uintptr_t, std::size_t> live_;   // address -> bytes
  std::map<std::uintptr_t, std::size_t> holes_;  // freed ranges below next_, address -> bytes
};

}  // namespace memtrain::memory
