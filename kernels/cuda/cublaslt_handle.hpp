#pragma once
// Owning wrapper of a cuBLASLt handle.
#include <cublasLt.h>

#include <cstddef>

namespace memtrain::kernels::gpu {

// Note [Fixed workspaces]
// cuBLASLt picks its algorithm by heuristics, and some algorithms want workspace (split-K
// partials) and others none. If the workspace followed the algorithm, the allocation sequence of
// a step would depend on the GPU and the library version, and a dry run could no longer predict
// a GPU run's trace. So the workspace is one fixed size allocated up front, and the heuristic is
// told that size as its limit (CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES): 32 MiB, what
// NVIDIA recommends for Hopper (cuBLAS documentation, "cublasSetWorkspace"; 4 MiB suffices
// before it), and what PyTorch's CUBLASLT_WORKSPACE_SIZE defaults to on sm_90.
inline constexpr std::size_t kBlasWorkspaceBytes = std::size_t{32} << 20;

// cublasLtCreate / cublasLtDestroy. Throws memory::CudaError when cuBLASLt cannot start (no
// driver, no device). Not copyable; movable.
class CublasLtHandle {
 public:
  CublasLtHandle();
  ~CublasLtHandle();
  CublasLtHandle(CublasLtHandle&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }
  CublasLtHandle& operator=(CublasLtHandle&&) = delete;
  CublasLtHandle(const CublasLtHandle&) = delete;
  CublasLtHandle& operator=(const CublasLtHandle&) = delete;
  cublasLtHandle_t get() const { return handle_; }

 private:
  cublasLtHandle_t handle_ = nullptr;
};

}  // namespace memtrain::kernels::gpu
