#include "kernels/cuda/rows.hpp"

#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/dtype_traits.cuh"

namespace memtrain::kernels::gpu {
namespace {

constexpr int kThreads = 256;

__global__ void add_bias_kernel(float* out, const float* bias, long long n, long long C) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    out[i] = __fadd_rn(out[i], bias[i % C]);
  }
}

__global__ void add_kernel(float* y, const float* x, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    y[i] = __fadd_rn(y[i], x[i]);
  }
}

// One block per row (grid-strided over rows), the row's 16-bit words over the block's threads.
__global__ void gather_rows_kernel(unsigned short* dst, const unsigned short* src, const int* rows, long long M,
                                   long long words) {
  for (long long m = blockIdx.x; m < M; m += gridDim.x) {
    const int r = rows[m];
    unsigned short* to = dst + m * words;
    for (long long w = threadIdx.x; w < words; w += blockDim.x) {
      to[w] = r < 0 ? static_cast<unsigned short>(0) : src[static_cast<long long>(r) * words + w];
    }
  }
}

__global__ void scatter_add_rows_kernel(float* dst, const float* src, const int* rows, long long M, long long C) {
  for (long long m = blockIdx.x; m < M; m += gridDim.x) {
    const int r = rows[m];
    if (r < 0) continue;
    float* to = dst + static_cast<long long>(r) * C;
    const float* from = src + m * C;
    for (long long c = threadIdx.x; c < C; c += blockDim.x) to[c] = __fadd_rn(to[c], from[c]);
  }
}

unsigned row_blocks(long long M) { return static_cast<unsigned>(M < 65535 ? (M < 1 ? 1 : M) : 65535); }

}  // namespace

void add_bias(const KernelContext& ctx, float* out, const float* bias, std::int64_t N, std::int64_t C) {
  const long long n = static_cast<long long>(N) * C;
  if (n == 0) return;
  add_bias_kernel<<<blocks_for(n, kThreads), kThreads, 0, ctx.stream>>>(out, bias, n, C);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

void add_inplace(const KernelContext& ctx, float* y, const float* x, std::int64_t n) {
  if (n == 0) return;
  add_kernel<<<blocks_for(n, kThreads), kThreads, 0, ctx.stream>>>(y, x, n);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

void gather_rows(const KernelContext& ctx, void* dst, const void* src, const std::int32_t* rows, std::int64_t M,
                 std::int64_t row_bytes) {
  if (row_bytes % 2 != 0) {
    throw std::invalid_argument("gather_rows: row_bytes = " + std::to_string(row_bytes) +
                                "; expected a multiple of 2 (rows of fp32, bf16 or fp16 elements)");
  }
  if (M == 0 || row_bytes == 0) return;
  gather_rows_kernel<<<row_blocks(M), kThreads, 0, ctx.stream>>>(
      static_cast<unsigned short*>(dst), static_cast<const unsigned short*>(src), rows, M, row_bytes / 2);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

void scatter_add_rows(const KernelContext& ctx, float* dst, const float* src, const std::int32_t* rows, std::int64_t M,
                      std::int64_t C) {
  if (M == 0 || C == 0) return;
  scatter_add_rows_kernel<<<row_blocks(M), kThreads, 0, ctx.stream>>>(dst, src, rows, M, C);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace memtrain::kernels::gpu
