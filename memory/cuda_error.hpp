#pragma once
#include <stdexcept>
#include <string>

#if MEMTRAIN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace memtrain::memory {

// CUDA is not usable (no driver, no device, a driver too old for the entry points we need) or
// a CUDA call failed for a reason other than a shortage of memory (that is memtrain::OutOfMemory).
// The message names the call, the CUDA error name and its description.
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

#if MEMTRAIN_HAVE_CUDA
// "<call>: <error name>: <description>": the message of every CudaError a runtime call raises.
std::string cuda_error_message(const char* call, cudaError_t err);
// Throws CudaError(cuda_error_message(call, err)) unless err is cudaSuccess.
void check_cuda(cudaError_t err, const char* call);
#endif

}  // namespace memtrain::memory
