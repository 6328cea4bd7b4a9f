#pragma once
// What a CUDA kernel needs besides its pointers and sizes (issue 14, design.md "kernels/"): the
// stream it is queued on, the cuBLASLt handle, and device memory it may use as scratch. Kernels
// never allocate, so the workspace sizes are fixed by whoever builds the context (see
// Note [Fixed workspaces] in cublaslt_handle.hpp), and an op's allocations never depend on
// which GEMM algorithm or which GPU runs it.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>

namespace memtrain::kernels::gpu {

struct KernelContext {
  cudaStream_t stream = nullptr;    // every launch and cuBLASLt call of an op goes here
  cublasLtHandle_t blas = nullptr;  // cublasLtCreate'd by the owner (CublasLtHandle)
  void* blas_workspace = nullptr;   // device memory handed to cublasLtMatmul
  std::size_t blas_workspace_bytes = 0;
  void* scratch = nullptr;  // device memory for reductions; each op says how much
  std::size_t scratch_bytes = 0;
  // Device memory the batch's index arrays are copied into, split into equal slots (Note
  // [Index arrays travel through fixed slots], kernels/ops/copy.hpp).
  void* staging = nullptr;
  std::size_t staging_bytes = 0;
  // fp32 GEMMs may use TF32 tensor cores (10-bit mantissa inputs, fp32 accumulation):
  // precision.allow_tf32, as torch.backends.cuda.matmul.allow_tf32.
  bool allow_tf32 = false;
};

}  // namespace memtrain::kernels::gpu
