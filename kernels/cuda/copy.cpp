#include "kernels/cuda/copy.hpp"

#include "kernels/cuda/cuda_check.hpp"

namespace memtrain::kernels::gpu {

void fill_zero(const KernelContext& ctx, void* dst, std::size_t bytes) {
  if (bytes == 0) return;
  MEMTRAIN_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, ctx.stream));
}

void copy_to_device(const KernelContext& ctx, void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  MEMTRAIN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx.stream));
}

void copy_on_device(const KernelContext& ctx, void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  MEMTRAIN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx.stream));
}

void copy_to_host(const KernelContext& ctx, void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  MEMTRAIN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx.stream));
  MEMTRAIN_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
}

}  // namespace memtrain::kernels::gpu
