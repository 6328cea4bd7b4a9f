#pragma once
// The virtual-memory model shared by CUDA VMM (cuMemAddressReserve / cuMemCreate / cuMemMap),
// host virtual memory (memfd_create + mmap(MAP_FIXED)) and the simulated virtual memory used by
// dry runs. Address space is reserved without memory behind it; physical chunks are created
// separately and mapped into reserved ranges, page by page. That split is what lets an
// allocator grow a segment in place (expandable segments) and map the pages of several free
// blocks into one new contiguous range (stitching, GMLake, ASPLOS 2024).
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "memory/memory_resource.hpp"

namespace memtrain::memory {

// A misuse of the virtual-memory API or a failure of the driver/kernel to map, unmap or reserve
// (not a shortage of memory: that is memtrain::OutOfMemory).
class VirtualMemoryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A reserved range of virtual addresses (no memory behind it until pages are mapped).
struct VirtualRange {
  std::uintptr_t address = 0;
  std::size_t bytes = 0;
};

// Opaque id of a physical chunk (CUmemGenericAllocationHandle, a memfd, a simulated id).
using PhysicalHandle = std::uint64_t;

// Contract: all sizes and offsets are multiples of granularity() (bytes). Physical chunks count
// against capacity_bytes(); reservations do not. map(va, bytes, handle, offset) maps
// [offset, offset + bytes) of the chunk at va, which must lie in a reserved range and be
// unmapped; a chunk may be mapped at several places at once only if the implementation says so
// (stitching maps each page once, so it never needs that). Implementations used by CUDA require
// offset == 0 and bytes == the chunk's size, so allocators map one chunk per page-sized handle.
// Errors: create_physical throws memtrain::OutOfMemory past the capacity; everything else throws
// VirtualMemoryError on misuse (unaligned size, unknown handle, range not reserved, overlap) or
// on a failure of the underlying API. Not thread-safe unless an implementation says so.
//
// As a plain MemoryResource it reserves, creates and maps one chunk per allocation (one call,
// and one chunk to release on deallocate), so it can also serve allocators that ignore VMM.
class VirtualMemoryResource : public MemoryResource {
 public:
  // Page size of mapping, in bytes (2 MiB on CUDA, the memfd page size on host).
  virtual std::size_t granularity() const = 0;
  virtual VirtualRange reserve(std::size_t bytes) = 0;
  // Releases a reservation; every page in it must be unmapped first.
  virtual void release(const VirtualRange& range) = 0;
  virtual PhysicalHandle create_physical(std::size_t bytes) = 0;
  // Frees a chunk; it must not be mapped anywhere.
  virtual void release_physical(PhysicalHandle handle) = 0;
  // Maps and makes the range readable and writable (cuMemMap + cuMemSetAccess).
  virtual void map(std::uintptr_t address, std::size_t bytes, PhysicalHandle handle, std::size_t offset) = 0;
  virtual void unmap(std::uintptr_t address, std::size_t bytes) = 0;

 protected:
  // reserve + create_physical + map of one chunk rounded up to the granularity, undone on
  // failure. Alignment above the granularity is refused with std::invalid_argument.
  void* do_allocate(std::size_t bytes, std::size_t alignment, StreamId stream) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, StreamId stream) override;

 public:
  ~VirtualMemoryResource() override;

 private:
  std::mutex plain_mutex_;
  // Chunk of each allocation made through the plain interface, by address.
  std::unordered_map<std::uintptr_t, PhysicalHandle> plain_chunks_;
};

// Maps fresh physical memory at `range` page by page: creates `range.bytes / granularity`
// page-sized chunks, then maps each. If creating or mapping fails, unmaps exactly the pages that
// were mapped, releases every chunk created (each once) and rethrows; the reservation itself is
// left to the caller. Returns nothing on success: the handles are written to `handles_out`
// (one per page, in address order), which must have room for them.
void map_fresh_pages(VirtualMemoryResource& vmm, const VirtualRange& range, PhysicalHandle* handles_out);

// Maps existing chunks (one page each) at consecutive pages from `address`. On failure unmaps
// the pages this call mapped and rethrows; the chunks stay with their owner.
void map_existing_pages(VirtualMemoryResource& vmm, std::uintptr_t address, const PhysicalHandle* handles,
                        std::size_t count);

}  // namespace memtrain::memory
