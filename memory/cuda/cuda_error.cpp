#include "memory/cuda_error.hpp"

namespace memtrain::memory {

std::string cuda_error_message(const char* call, cudaError_t err) {
  return std::string(call) + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
}

void check_cuda(cudaError_t err, const char* call) {
  if (err != cudaSuccess) throw CudaError(cuda_error_message(call, err));
}

}  // namespace memtrain::memory
