#pragma once
// Loads and stores of the three storage types in fp32 registers, for the elementwise kernels.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace memtrain::kernels::gpu {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}

// kernels::float_to_bf16's bits: round to nearest even, a NaN made quiet with its sign and top
// payload bits kept (the hardware's cvt.rn gives the same bits except for NaN payloads).
__device__ __forceinline__ unsigned short bf16_bits_from_float(float x) {
  const unsigned int f = __float_as_uint(x);
  if ((f & 0x7fffffffu) > 0x7f800000u) return static_cast<unsigned short>((f >> 16) | 0x40u);
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

// kernels::float_to_f16's bits: round to nearest even, a NaN made quiet with its sign and top
// payload bits kept (cvt.rn agrees on every other value).
__device__ __forceinline__ unsigned short f16_bits_from_float(float x) {
  const unsigned int f = __float_as_uint(x);
  if ((f & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<unsigned short>(((f >> 16) & 0x8000u) | 0x7e00u | (((f & 0x7fffffffu) >> 13) & 0x3ffu));
  }
  return __half_as_ushort(__float2half_rn(x));
}

// Blocks for n elements at `threads` per block, capped so huge tensors use grid-stride loops.
inline unsigned blocks_for(long long n, int threads) {
  const long long b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535LL * 16 ? 65535LL * 16 : b));
}

}  // namespace memtrain::kernels::gpu
