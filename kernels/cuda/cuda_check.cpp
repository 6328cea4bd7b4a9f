#include "kernels/cuda/cuda_check.hpp"

#include <string>

#include "kernels/cuda/cublaslt_api.hpp"
#include "memory/cuda_error.hpp"

namespace memtrain::kernels::gpu {

void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  throw memory::CudaError(memory::cuda_error_message(call, status) + " (" + file + ":" + std::to_string(line) + ")");
}

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw memory::CudaError(std::string(call) + ": " + cublaslt().GetStatusName(status) + ": " +
                          cublaslt().GetStatusString(status) + " (" + file + ":" + std::to_string(line) + ")");
}

}  // namespace memtrain::kernels::gpu
