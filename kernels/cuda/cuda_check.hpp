#pragma once
// Turning CUDA runtime and cuBLASLt status codes into memtrain::memory::CudaError.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

namespace memtrain::kernels::gpu {

// Throws memory::CudaError "<call>: <error name>: <description> (<file>:<line>)" unless ok.
void check_cuda(cudaError_t status, const char* call, const char* file, int line);
void check_cublas(cublasStatus_t status, const char* call, const char* file, int line);

}  // namespace memtrain::kernels::gpu

#define MEMTRAIN_CUDA_CHECK(call) ::memtrain::kernels::gpu::check_cuda((call), #call, __FILE__, __LINE__)
#define MEMTRAIN_CUBLAS_CHECK(call) ::memtrain::kernels::gpu::check_cublas((call), #call, __FILE__, __LINE__)
// After a kernel launch: launch-configuration errors surface here, execution errors at the
// next synchronizing call.
#define MEMTRAIN_CUDA_CHECK_LAUNCH() MEMTRAIN_CUDA_CHECK(cudaGetLastError())
