#include "kernels/cuda/half_convert.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/dtype_traits.cuh"

namespace memtrain::kernels::gpu {
namespace {

// The hardware conversions (cvt.rn) agree with the CPU's on every finite value and infinity;
// only NaN payloads differ, so NaNs take the CPU's bit formulas.
__device__ __forceinline__ float half_bits_to_float(std::uint16_t h, bool bf16) {
  if (bf16) return __uint_as_float(static_cast<unsigned int>(h) << 16);
  const unsigned int man = h & 0x3ffu;
  if (((h >> 10) & 0x1fu) == 0x1fu && man != 0) {
    return __uint_as_float((static_cast<unsigned int>(h & 0x8000u) << 16) | 0x7f800000u | (man << 13) | 0x400000u);
  }
  return __half2float(__ushort_as_half(h));
}

__device__ __forceinline__ std::uint16_t float_to_half_bits(float x, bool bf16) {
  return bf16 ? bf16_bits_from_float(x) : f16_bits_from_float(x);
}

__global__ void to_float_kernel(float* out, const std::uint16_t* in, long long n, bool bf16) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    out[i] = half_bits_to_float(in[i], bf16);
  }
}

__global__ void to_half_kernel(std::uint16_t* out, const float* in, long long n, bool bf16) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    out[i] = float_to_half_bits(in[i], bf16);
  }
}

}  // namespace

void convert_half_to_float(const KernelContext& ctx, float* out, const std::uint16_t* in, std::int64_t n,
                           HalfFormat f) {
  if (n == 0) return;
  to_float_kernel<<<blocks_for(n, 256), 256, 0, ctx.stream>>>(out, in, n, f == HalfFormat::bf16);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

void convert_float_to_half(const KernelContext& ctx, std::uint16_t* out, const float* in, std::int64_t n,
                           HalfFormat f) {
  if (n == 0) return;
  to_half_kernel<<<blocks_for(n, 256), 256, 0, ctx.stream>>>(out, in, n, f == HalfFormat::bf16);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace memtrain::kernels::gpu
