#pragma once
// The 16-bit conversions (IEEE binary16 and bfloat16, round to nearest even) through the op API:
// kernels/cpu/half_convert or kernels/cuda/half_convert, bitwise the same on both.
#include <cstdint>

#include "kernels/half_format.hpp"
#include "kernels/op_context.hpp"

namespace memtrain::kernels::ops {

// out [n] (float) = in [n] (16-bit bit patterns of format f).
void convert_half_to_float(const OpContext& kc, float* out, const std::uint16_t* in, std::int64_t n, HalfFormat f);
// out [n] (16-bit bit patterns of format f) = in [n] rounded to nearest even.
void convert_float_to_half(const OpContext& kc, std::uint16_t* out, const float* in, std::int64_t n, HalfFormat f);
// out [n] = x [n] rounded, and x [n] replaced by the rounded values (kernels/cpu's
// round_float_to_half: one pass on the CPU; on a GPU the two conversions above, one after the
// other on the stream, which give the same bits).
void round_float_to_half(const OpContext& kc, std::uint16_t* out, float* x, std::int64_t n, HalfFormat f);

}  // namespace memtrain::kernels::ops
