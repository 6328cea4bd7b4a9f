#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "memory/virtual_memory_resource.hpp"

namespace memtrain::memory {

// Real virtual memory on the host, in the CUDA VMM model: reserve() takes address space with
// mmap(PROT_NONE) and no memory behind it; create_physical() makes a memfd_create file of the
// chunk's size (tmpfs pages, allocated on first touch); map() puts a piece of it into the
// reserved range with mmap(MAP_SHARED | MAP_FIXED), read-write; unmap() puts PROT_NONE
// anonymous memory back over the pages, so the range stays reserved. Stitching and expandable
// segments therefore run for real on CPU, and a test can write through one mapping and read
// through another.
//
// Unlike CUDA, a chunk may be mapped at several places at once, and any granularity-aligned
// piece of it may be mapped (offset > 0). Physical chunks count against `capacity_bytes`
// (0 = unbounded): past it create_physical throws memtrain::OutOfMemory, as it does when the
// kernel refuses the memfd. Misuse (sizes or addresses not multiples of the granularity, unknown
// handles, mapping outside a reservation or over a mapped page, releasing a mapped chunk or a
// reservation with mapped pages) throws VirtualMemoryError, and so does a failing system call
// (with errno's text). Reservations and mappings are aligned to the granularity. The destructor
// unmaps, closes and releases whatever is left. Thread-safe.
class HostVirtualMemoryResource final : public VirtualMemoryResource {
 public:
  // granularity: a power of two and a multiple of the system page size (2 MiB by default,
  // CUDA's granularity; tests use 4 KiB or 64 KiB to stay small). Throws std::invalid_argument.
  explicit HostVirtualMemoryResource(std::size_t capacity_bytes = 0, std::size_t granularity = std::size_t{2} << 20,
                                     std::string name = "host vmm");
  ~HostVirtualMemoryResource() override;
  HostVirtualMemoryResource(const HostVirtualMemoryResource&) = delete;
  HostVirtualMemoryResource& operator=(const HostVirtualMemoryResource&) = delete;

  std::size_t capacity_bytes() const override { return capacity_; }
  std::string name() const override { return name_; }
  std::size_t granularity() const override { return granularity_; }

  VirtualRange reserve(std::size_t bytes) override;
  void release(const VirtualRange& range) override;
  PhysicalHandle create_physical(std::size_t bytes) override;
  void release_physical(PhysicalHandle handle) override;
  void map(std::uintptr_t address, std::size_t bytes, PhysicalHandle handle, std::size_t offset) override;
  void unmap(std::uintptr_t address, std::size_t bytes) override;

  // Inspection for tests.
  std::size_t physical_bytes() const;  // bytes of live chunks
  std::size_t mapped_bytes() const;    // bytes mapped anywhere
  std::size_t live_chunks() const;
  std::size_t live_reservations() const;

 private:
  struct Chunk {
    int fd = -1;
    std::size_t bytes = 0;
    std::size_t times_mapped = 0;
  };
  struct Mapping {
    std::size_t bytes = 0;
    PhysicalHandle handle = 0;
  };
  void check_multiple(std::size_t value, const char* what) const;
  void unmap_locked(std::uintptr_t address, std::size_t bytes);

  std::size_t capacity_;
  std::size_t granularity_;
  std::string name_;
  mutable std::mutex mutex_;
  PhysicalHandle next_handle_ = 1;
  std::size_t physical_bytes_ = 0;
  std::size_t mapped_bytes_ = 0;
  std::map<std::uintptr_t, std::size_t> reservations_;  // address -> bytes
  std::map<PhysicalHandle, Chunk> chunks_;
  std::map<std::uintptr_t, Mapping> mappings_;  // address -> mapping
};

}  // namespace memtrain::memory
