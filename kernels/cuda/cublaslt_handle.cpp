#include "kernels/cuda/cublaslt_handle.hpp"

#include "kernels/cuda/cuda_check.hpp"

namespace memtrain::kernels::gpu {

CublasLtHandle::CublasLtHandle() { MEMTRAIN_CUBLAS_CHECK(cublasLtCreate(&handle_)); }

CublasLtHandle::~CublasLtHandle() {
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

}  // namespace memtrain::kernels::gpu
