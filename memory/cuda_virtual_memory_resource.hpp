#pragma once
// CUDA virtual memory management (cuMemCreate / cuMemAddressReserve / cuMemMap), behind the
// VirtualMemoryResource interface. Compiled only when nvcc was found (MEMTRAIN_HAVE_CUDA).
#include "memory/cuda_error.hpp"

#if MEMTRAIN_HAVE_CUDA
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "memory/virtual_memory_resource.hpp"

namespace memtrain::memory {

// Physical chunks from cuMemCreate (pinned device memory on `device`), mapped into ranges
// reserved by cuMemAddressReserve and made read-write for the device by cuMemSetAccess.
// Granularity: 2 MiB (raised to the device's minimum if that is larger).
//
// The driver functions are obtained at run time through cudaGetDriverEntryPointByVersion, so
// the binary never links libcuda and starts on machines without a driver. Construction throws
// CudaError when there is no driver or device, or when the driver lacks VMM support.
// cuMemCreate failing for lack of memory, or chunks past `capacity_bytes` (0 = the device's
// total memory), throw memtrain::OutOfMemory. Misuse (unaligned sizes, unknown handles,
// mapping outside a reservation or over a mapped page, releasing a mapped chunk) throws
// VirtualMemoryError before any driver call. A chunk is mapped whole (CUDA requires offset 0 and
// the chunk's size), at one address or at several (Note [Stitching aliases chunks]). unmap
// first waits for all work queued on the device (Note [Unmapping waits for the device], in the
// .cpp). The destructor unmaps and releases whatever is left. Thread-safe.
//
// Note [Stitching aliases chunks]
// vmm_stitch maps the free pages of existing segments a second time, side by side in a fresh
// reservation, while their segments keep their own mappings. CUDA allows this: "virtual
// aliasing", several cuMemMap calls of one allocation handle at different addresses (CUDA C++
// Programming Guide, Virtual Memory Management, "Virtual Aliasing Support"). This resource once
// refused a second mapping, and on a real GPU every stitch failed and fell back to a new
// segment without a word; only the device test (tests/gpu, issue 14) showed it: the host
// model (memfd + mmap) had always allowed aliases. A chunk now counts its mappings and is
// released only when none is left.
class CudaVirtualMemoryResource final : public VirtualMemoryResource {
 public:
  explicit CudaVirtualMemoryResource(int device = 0, std::size_t capacity_bytes = 0);
  ~CudaVirtualMemoryResource() override;

  std::size_t granularity() const override { return granularity_; }
  std::size_t capacity_bytes() const override { return capacity_; }
  std::string name() const override { return "cuda-vmm:" + std::to_string(device_); }
  std::size_t physical_bytes() const;  // bytes of live chunks

  VirtualRange reserve(std::size_t bytes) override;
  void release(const VirtualRange& range) override;
  PhysicalHandle create_physical(std::size_t bytes) override;
  void release_physical(PhysicalHandle handle) override;
  void map(std::uintptr_t address, std::size_t bytes, PhysicalHandle handle, std::size_t offset) override;
  void unmap(std::uintptr_t address, std::size_t bytes) override;

  struct Driver;  // the driver entry points (defined in the .cpp)

 private:
  struct Chunk {
    std::size_t bytes = 0;
    int mappings = 0;  // a chunk may be mapped at several addresses (Note [Stitching aliases chunks])
  };
  struct Mapping {
    std::size_t bytes = 0;
    PhysicalHandle handle = 0;
  };
  void check_aligned(std::size_t value, const char* what) const;
  // Waits for all work queued on device_ (Note [Unmapping waits for the device]); throws
  // CudaError when the device reports an error.
  void wait_for_device() const;

  int device_;
  std::size_t granularity_ = 0;
  std::size_t capacity_ = 0;
  std::unique_ptr<Driver> driver_;
  mutable std::mutex mutex_;
  std::size_t physical_bytes_ = 0;
  std::map<std::uintptr_t, std::size_t> reservations_;  // address -> bytes
  std::map<PhysicalHandle, Chunk> chunks_;
  std::map<std::uintptr_t, Mapping> mappings_;  // address -> mapped chunk
};

}  // namespace memtrain::memory
#endif  // MEMTRAIN_HAVE_CUDA
