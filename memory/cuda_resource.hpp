#pragma once
// Device memory from cudaMalloc. Compiled only when nvcc was found (MEMTRAIN_HAVE_CUDA).
#include "memory/cuda_error.hpp"

#if MEMTRAIN_HAVE_CUDA
#include <cstddef>
#include <string>

#include "memory/memory_resource.hpp"

namespace memtrain::memory {

// Number of CUDA devices this process can use; 0 when there is no driver or no device. Never
// throws (cudaGetDeviceCount leaves its output unwritten on error, so the count starts at 0).
int cuda_device_count() noexcept;

// Why CUDA is unusable ("cudaGetDeviceCount: cudaErrorInsufficientDriver: ..."), or "" when a
// device exists.
std::string cuda_unavailable_reason();

// cudaMalloc / cudaFree on one device: the upstream of a CachingAllocator on a GPU.
// Construction throws CudaError when the device does not exist or there is no driver.
// Allocations are 256-byte aligned (CUDA guarantees at least that); a larger alignment throws
// std::invalid_argument. A failed cudaMalloc for lack of memory throws memtrain::OutOfMemory with
// the device's free and total bytes (cudaMemGetInfo); other CUDA failures throw CudaError.
// The stream argument is ignored: cudaMalloc and cudaFree synchronize the device.
// Thread-safe (the CUDA runtime is).
class CudaResource final : public MemoryResource {
 public:
  explicit CudaResource(int device = 0);
  std::size_t capacity_bytes() const override { return capacity_; }
  // The device's free bytes (cudaMemGetInfo): what other processes, memtrain or not, left.
  std::size_t available_bytes() const override;
  std::string name() const override { return "cuda:" + std::to_string(device_); }
  int device() const { return device_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, StreamId stream) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, StreamId stream) override;

  int device_;
  std::size_t capacity_ = 0;
};

}  // namespace memtrain::memory
#endif  // MEMTRAIN_HAVE_CUDA
