#pragma once
// 16-bit floating point storage formats: conversions to and from float, and the finite check
// the dynamic loss scaler needs. Values are carried as their bit patterns (std::uint16_t).
//
// f16  = IEEE 754-2008 binary16: 1 sign, 5 exponent (bias 15), 10 fraction bits;
//        largest finite 65504, smallest normal 2^-14, smallest subnormal 2^-24.
// bf16 = bfloat16 (the top 16 bits of an IEEE binary32): 1 sign, 8 exponent (bias 127),
//        7 fraction bits; the range of float, largest finite 0x7F7F = 3.3895e38.
#include <bit>
#include <cstdint>

#include "kernels/half_format.hpp"

namespace memtrain::kernels {

// float -> binary16, rounding to nearest, ties to even (IEEE 754 section 4.3.1, the default
// rounding). Magnitudes >= 65520 (halfway between 65504 and the next power, 2^16) become
// +/-inf, as IEEE overflow under round-to-nearest; NaN stays a quiet NaN with the sign and the
// top 9 payload bits kept (what F16C's vcvtps2ph does, so both paths agree bitwise).
std::uint16_t float_to_f16(float x);

// binary16 -> float; exact for every pattern (subnormals become normal floats). NaN payloads
// are kept, shifted into the top of the float's fraction.
float f16_to_float(std::uint16_t h);

// float -> bfloat16, rounding to nearest, ties to even (as torch's c10::BFloat16 and
// TensorFlow's bfloat16 round); overflow past 0x7F7F rounds to inf. NaN stays a NaN, made
// quiet so that truncating the payload can never turn it into inf. Inline (bit operations
// only), so that loops in other files that convert as they go still vectorize.
inline std::uint16_t float_to_bf16(float x) {
  std::uint32_t f = std::bit_cast<std::uint32_t>(x);
  if ((f & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<std::uint16_t>((f >> 16) | 0x40u);  // quiet NaN, sign kept
  }
  f += 0x7fffu + ((f >> 16) & 1u);  // round to nearest even; may carry up to inf
  return static_cast<std::uint16_t>(f >> 16);
}

// bfloat16 -> float; exact (the 16 bits become the top half of the float).
inline float bf16_to_float(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

// out[i] = to_float(in[i]) for i in [0, n). Shapes: out, in [n]. f16 uses F16C
// (_mm256_cvtph_ps) when compiled with __F16C__, the scalar conversion otherwise; both give the
// same bits. Threads (OpenMP) for large n. Never allocates; out must not alias in.
void convert_half_to_float(float* out, const std::uint16_t* in, std::int64_t n, HalfFormat f);

// out[i] = to_half(in[i]) for i in [0, n), rounding as float_to_f16 / float_to_bf16.
// Shapes: out, in [n]. f16 uses F16C (_mm256_cvtps_ph, _MM_FROUND_TO_NEAREST_INT) when
// compiled with __F16C__. Never allocates; out must not alias in.
void convert_float_to_half(std::uint16_t* out, const float* in, std::int64_t n, HalfFormat f);

// out[i] = to_half(x[i]) as convert_float_to_half, and x[i] replaced by to_float(out[i]) in the
// same pass: afterwards x holds exactly what convert_half_to_float(out) would give, without that
// second pass over cold memory (Note [Views rounded in place]). NaN stays NaN (quieted, as both
// conversions do). Shapes: out, x [n]. Threads for large n; never allocates.
void round_float_to_half(std::uint16_t* out, float* x, std::int64_t n, HalfFormat f);

// True when no element of x [n] is inf or NaN (the loss scaler's overflow check on fp32
// gradients). Reads every element; never allocates.
bool all_finite(const float* x, std::int64_t n);

// True when no element of x [n], read as format f, is inf or NaN.
bool all_finite(const std::uint16_t* x, std::int64_t n, HalfFormat f);

namespace detail {

// The portable conversions the bulk functions fall back to without F16C; exposed so that the
// tests can hold the F16C path to them bit for bit. Same contracts as above, single-threaded.
void convert_half_to_float_scalar(float* out, const std::uint16_t* in, std::int64_t n, HalfFormat f);
void convert_float_to_half_scalar(std::uint16_t* out, const float* in, std::int64_t n, HalfFormat f);

// True when this build converts f16 with F16C instructions.
bool f16_uses_f16c();

}  // namespace detail
}  // namespace memtrain::kernels
