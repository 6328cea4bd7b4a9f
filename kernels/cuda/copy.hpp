#pragma once
// Zeroing and copies of device memory on the kernel context's stream: what a tensor on the GPU
// needs besides the kernels (zeros, parameters initialised on the host, values read back).
#include <cstddef>

#include "kernels/cuda/kernel_context.hpp"

namespace memtrain::kernels::gpu {

// bytes of device memory at dst set to 0 (cudaMemsetAsync). Asynchronous on ctx.stream.
void fill_zero(const KernelContext& ctx, void* dst, std::size_t bytes);

// Host src -> device dst (cudaMemcpyAsync from pageable memory: CUDA stages it, so src may be
// reused when this returns). Ordered after the work queued on ctx.stream.
void copy_to_device(const KernelContext& ctx, void* dst, const void* src, std::size_t bytes);

// Device src -> device dst (cudaMemcpyAsync on ctx.stream); must not overlap.
void copy_on_device(const KernelContext& ctx, void* dst, const void* src, std::size_t bytes);

// Device src -> host dst; waits for ctx.stream, so dst holds the values when this returns.
void copy_to_host(const KernelContext& ctx, void* dst, const void* src, std::size_t bytes);

}  // namespace memtrain::kernels::gpu
