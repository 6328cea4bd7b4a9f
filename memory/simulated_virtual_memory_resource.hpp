#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "memory/virtual_memory_resource.hpp"

namespace memtrain::memory {

// The virtual-memory model without memory: reservations, chunks and mappings are bookkeeping
// only, so vmm_stitch and expandable segments can be planned and replayed on a simulated device
// of any size. It checks the contract strictly (every misuse throws VirtualMemoryError) and
// counts calls, which makes it the reference that allocator tests inspect. A fault can be
// injected into the n-th future map() call. Thread-safe.
class SimulatedVirtualMemoryResource final : public VirtualMemoryResource {
 public:
  // capacity_bytes: physical bytes that may exist at once; granularity: page size (power of two).
  SimulatedVirtualMemoryResource(std::size_t capacity_bytes, std::string name = "simulated vmm",
                                 std::size_t granularity = std::size_t{2} << 20);

  std::size_t capacity_bytes() const override { return capacity_; }
  std::string name() const override { return name_; }
  bool backs_memory() const override { return false; }
  std::size_t granularity() const override { return granularity_; }

  VirtualRange reserve(std::size_t bytes) override;
  void release(const VirtualRange& range) override;
  PhysicalHandle create_physical(std::size_t bytes) override;
  void release_physical(PhysicalHandle handle) override;
  void map(std::uintptr_t address, std::size_t bytes, PhysicalHandle handle, std::size_t offset) override;
  void unmap(std::uintptr_t address, std::size_t bytes) override;

  // The n-th map() call from now (1 = the next one) throws VirtualMemoryError without mapping.
  void inject_map_failure(std::size_t nth_call);

  // Inspection for tests.
  struct Counters {
    std::size_t reserve_calls = 0, release_calls = 0;
    std::size_t create_calls = 0, release_physical_calls = 0;
    std::size_t map_calls = 0, failed_map_calls = 0, unmap_calls = 0;
  };
  Counters counters() const;
  std::size_t physical_bytes() const;  // bytes in live chunks
  std::size_t mapped_bytes() const;    // bytes mapped anywhere
  std::size_t live_reservations() const;
  std::size_t live_chunks() const;
  // Page addresses of every successful map() and of every mapping removed by unmap(), in
  // call order; handles of every release_physical() that succeeded.
  std::vector<std::uintptr_t> mapped_log() const;
  std::vector<std::uintptr_t> unmapped_log() const;
  std::vector<PhysicalHandle> released_physical_log() const;

 private:
  struct Mapping {
    std::size_t bytes;
    PhysicalHandle handle;
  };
  std::size_t capacity_;
  std::string name_;
  std::size_t granularity_;
  mutable std::mutex mutex_;
  std::uintptr_t next_address_;
  PhysicalHandle next_handle_ = 1;
  std::size_t physical_bytes_ = 0;
  std::size_t fail_map_in_ = 0;  // 0 = no injected failure pending
  Counters counters_;
  std::map<std::uintptr_t, std::size_t> reservations_;          // address -> bytes
  std::unordered_map<PhysicalHandle, std::size_t> chunks_;      // handle -> bytes
  std::unordered_map<PhysicalHandle, std::size_t> chunk_maps_;  // handle -> times mapped
  std::map<std::uintptr_t, Mapping> mappings_;                  // address -> mapping
  std::vector<std::uintptr_t> mapped_log_, unmapped_log_;
  std::vector<PhysicalHandle> released_physical_log_;
};

}  // namespace memtrain::memory
