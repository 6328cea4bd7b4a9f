#include "memory/cuda_resource.hpp"

#include <cuda_runtime_api.h>

#include <stdexcept>

#include "memory/byte_size.hpp"
#include "memory/out_of_memory.hpp"

namespace memtrain::memory {
namespace {

[[noreturn]] void throw_cuda(const char* call, cudaError_t err) { throw CudaError(cuda_error_message(call, err)); }

// Makes `device` current for the calling thread (the runtime's current device is per thread).
void set_device(int device) {
  if (const cudaError_t err = cudaSetDevice(device); err != cudaSuccess) {
    throw_cuda("cudaSetDevice", err);
  }
}

}  // namespace

int cuda_device_count() noexcept {
  int count = 0;  // left unwritten when there is no driver
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls do not report it
    return 0;
  }
  return count;
}

std::string cuda_unavailable_reason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return cuda_error_message("cudaGetDeviceCount", err);
  }
  if (count == 0) return "cudaGetDeviceCount: no CUDA device";
  return "";
}

CudaResource::CudaResource(int device) : device_(device) {
  const int count = cuda_device_count();
  if (device < 0 || device >= count) {
    const std::string reason = cuda_unavailable_reason();
    throw CudaError("cuda:" + std::to_string(device) + " is not available (" +
                    (reason.empty() ? std::to_string(count) + " device(s) present" : reason) +
                    "); use device: cpu, or run where an NVIDIA driver and GPU are present");
  }
  set_device(device_);
  std::size_t free_bytes = 0, total_bytes = 0;
  if (const cudaError_t err = cudaMemGetInfo(&free_bytes, &total_bytes); err != cudaSuccess) {
    throw_cuda("cudaMemGetInfo", err);
  }
  capacity_ = total_bytes;
}

void* CudaResource::do_allocate(std::size_t bytes, std::size_t alignment, StreamId) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > 256) {
    throw std::invalid_argument("CudaResource: alignment " + std::to_string(alignment) +
                                " is not a power of two up to 256 (cudaMalloc's guarantee)");
  }
  if (bytes == 0) return nullptr;
  set_device(device_);
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    std::size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    throw OutOfMemory("out of memory on " + name() + ": cudaMalloc of " + format_byte_size(bytes) + " failed; " +
                          format_byte_size(free_bytes) + " free of " + format_byte_size(total_bytes) +
                          " (cudaMemGetInfo)",
                      bytes);
  }
  if (err != cudaSuccess) throw_cuda("cudaMalloc", err);
  return p;
}

std::size_t CudaResource::available_bytes() const {
  set_device(device_);
  std::size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return SIZE_MAX;  // cannot say; the allocator's own figure stands
  }
  return free_bytes;
}

void CudaResource::do_deallocate(void* p, std::size_t, std::size_t, StreamId) {
  if (p == nullptr) return;
  set_device(device_);
  if (const cudaError_t err = cudaFree(p); err != cudaSuccess) throw_cuda("cudaFree", err);
}

}  // namespace memtrain::memory
