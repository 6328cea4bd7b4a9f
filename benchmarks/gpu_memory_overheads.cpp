// Device memory that a GPU run holds outside the caching allocator (issue 14): the CUDA
// context, the loaded kernel images, the cuBLASLt handle and its fixed workspace, and an NCCL
// communicator, measured on the GPU this runs on and printed beside the estimates that
// `memtrain plan --target` charges (runtime/config/device_target.cpp, Note [Target capacities
// and what is not the allocator's]). The context is cudaMemGetInfo's used memory right after it
// exists, less nvidia-smi's memory.used before the program started (passed in as
// MEMTRAIN_USED_BEFORE_MIB; 0 if not given); the rest are differences of cudaMemGetInfo. Prints
// one JSON object. Without a GPU it says so and exits 0.
#include <cstdio>
#include <cstdlib>
#include <string>

#if MEMTRAIN_HAVE_CUDA
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "comms/nccl_communicator.hpp"
#include "comms/single_rank_communicator.hpp"
#include "kernels/cuda/cublaslt_handle.hpp"
#include "kernels/cuda/gelu.hpp"
#include "kernels/cuda/layernorm.hpp"
#include "kernels/cuda/linear.hpp"
#include "memory/cuda_resource.hpp"

namespace {

double used_mib() {
  std::size_t free = 0, total = 0;
  cudaMemGetInfo(&free, &total);
  return static_cast<double>(total - free) / (1 << 20);
}

}  // namespace

int main() {
  using namespace memtrain;
  if (memory::cuda_device_count() == 0) {
    std::printf("{\"error\": \"no CUDA device: %s\"}\n", memory::cuda_unavailable_reason().c_str());
    return 0;
  }
  const char* before_env = std::getenv("MEMTRAIN_USED_BEFORE_MIB");
  const double before = before_env ? std::atof(before_env) : 0.0;
  cudaFree(nullptr);  // creates the primary context
  const double context = used_mib();
  // Every memtrain kernel image this program links, loaded by one launch each (CUDA 13 loads
  // modules lazily), and a cuBLASLt handle with a first matmul (its own kernels).
  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  kernels::gpu::CublasLtHandle handle;
  void* workspace = nullptr;
  cudaMalloc(&workspace, kernels::gpu::kBlasWorkspaceBytes);
  kernels::gpu::KernelContext ctx;
  ctx.stream = stream;
  ctx.blas = handle.get();
  ctx.blas_workspace = workspace;
  ctx.blas_workspace_bytes = kernels::gpu::kBlasWorkspaceBytes;
  __nv_bfloat16* x = nullptr;
  float* stats = nullptr;
  cudaMalloc(&x, 3 * 256 * 256 * sizeof(__nv_bfloat16));
  cudaMalloc(&stats, 2 * 256 * sizeof(float));
  const double buffers = used_mib();
  kernels::gpu::linear_forward<__nv_bfloat16>(ctx, x + 2 * 65536, x, x + 65536, nullptr, 256, 256, 256);
  kernels::gpu::bias_gelu_forward<__nv_bfloat16>(ctx, x, x, nullptr, 256, 256);
  kernels::gpu::layernorm_forward<__nv_bfloat16>(ctx, x, stats, stats + 256, x + 65536, x, x, 256, 256, 1e-12f);
  cudaStreamSynchronize(stream);
  const double kernels_loaded = used_mib();
  comms::SingleRankCommunicator host;
  auto nccl = comms::NcclCommunicator::create(host, 0);
  nccl->allreduce_sum(stats, 256);
  const double with_nccl = used_mib();
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf(
      "{\"device\": \"%s\", \"used_before_context_mib\": %.0f, \"context_mib\": %.0f, "
      "\"cublaslt_workspace_and_test_buffers_mib\": %.0f, \"kernel_images_and_cublaslt_mib\": %.0f, "
      "\"nccl_world_of_one_mib\": %.0f, \"plan_estimates_h200_mib\": {\"cuda_context\": 640, "
      "\"cublas_workspace\": 32, \"nccl_buffers_world_size_gt_1\": 256}}\n",
      prop.name, before, context - before, buffers - context, kernels_loaded - buffers, with_nccl - kernels_loaded);
  nccl.reset();
  cudaFree(x);
  cudaFree(stats);
  cudaFree(workspace);
  cudaStreamDestroy(stream);
  return 0;
}
#else
int main() {
  std::puts("{\"error\": \"memtrain was built without CUDA\"}");
  return 0;
}
#endif
