#include "kernels/cuda/cublaslt_handle.hpp"

#include "kernels/cuda/cublaslt_api.hpp"
#include "kernels/cuda/cuda_check.hpp"

namespace memtrain::kernels::gpu {

CublasLtHandle::CublasLtHandle() { MEMTRAIN_CUBLAS_CHECK(cublaslt().Create(&handle_)); }

CublasLtHandle::~CublasLtHandle() {
  if (handle_ != nullptr) cublaslt().Destroy(handle_);
}

}  // namespace memtrain::kernels::gpu
