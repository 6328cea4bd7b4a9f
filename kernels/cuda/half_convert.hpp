#pragma once
// 16-bit <-> fp32 conversions on the GPU: the CUDA twins of kernels/cpu/half_convert.hpp.
#include <cstdint>

#include "kernels/cpu/half_convert.hpp"
#include "kernels/cuda/kernel_context.hpp"

namespace memtrain::kernels::gpu {

// out [n] = the fp32 value of each 16-bit word in [n] (exact). A NaN comes out quiet with its
// sign and payload, as the CPU's conversion gives it: bitwise convert_half_to_float.
void convert_half_to_float(const KernelContext& ctx, float* out, const std::uint16_t* in, std::int64_t n, HalfFormat f);

// out [n] = each fp32 value rounded to nearest even in the 16-bit format (overflow to inf; NaN
// quiet, sign and top payload bits kept): bitwise convert_float_to_half.
void convert_float_to_half(const KernelContext& ctx, std::uint16_t* out, const float* in, std::int64_t n, HalfFormat f);

}  // namespace memtrain::kernels::gpu
