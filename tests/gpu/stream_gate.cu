#include "tests/gpu/stream_gate.hpp"

#include "kernels/cuda/cuda_check.hpp"

namespace memtrain::gpu_testing {
namespace {

__global__ void wait_for_flag(const volatile int* flag) {
  while (*flag == 0) __nanosleep(1000);
}

}  // namespace

StreamGate::StreamGate() {
  int* host = nullptr;
  MEMTRAIN_CUDA_CHECK(cudaHostAlloc(&host, sizeof(int), cudaHostAllocMapped));
  flag_ = host;
  *flag_ = 0;
  MEMTRAIN_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_flag_), host, 0));
}

StreamGate::~StreamGate() {
  open();
  cudaDeviceSynchronize();
  cudaFreeHost(const_cast<int*>(flag_));
}

void StreamGate::close_on(cudaStream_t stream) {
  *flag_ = 0;
  wait_for_flag<<<1, 1, 0, stream>>>(device_flag_);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

void StreamGate::open() { *flag_ = 1; }

}  // namespace memtrain::gpu_testing
