#include "kernels/cpu/half_convert.hpp"

#include <algorithm>
#include <bit>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "kernels/cpu/parallel.hpp"

namespace memtrain::kernels {
namespace {

// Note [Integer rounding in the scalar conversions]
// The scalar paths round with integer arithmetic on the bit patterns instead of the usual
// "add a magic float" trick, so their result never depends on the FPU's rounding mode or on
// flush-to-zero / denormals-are-zero (set by -ffast-math builds or by other libraries in the
// process), which would silently flush f16 subnormals.

constexpr std::uint32_t kFloatAbsMask = 0x7fffffffu;
constexpr std::uint32_t kFloatExpMask = 0x7f800000u;     // also +inf
constexpr std::uint32_t kF16OverflowAt = 0x477ff000u;    // 65520.0f: rounds to 2^16, not finite
constexpr std::uint32_t kF16MinNormal = 0x38800000u;     // 2^-14
constexpr std::uint32_t kF16RoundsToZero = 0x33000000u;  // 2^-25: half the smallest subnormal

// Elements per OpenMP work item, and the size from which a thread team is worth waking
// (Note [No thread team for small or single-threaded loops]).
constexpr std::int64_t kChunk = 1 << 14;
constexpr std::int64_t kParallelFrom = 1 << 18;

std::uint16_t f16_from_bits(std::uint32_t f) {
  const auto sign = static_cast<std::uint16_t>((f >> 16) & 0x8000u);
  std::uint32_t a = f & kFloatAbsMask;
  if (a > kFloatExpMask) {  // NaN: quiet bit set, top payload bits kept
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  }
  if (a >= kF16OverflowAt) return static_cast<std::uint16_t>(sign | 0x7c00u);  // inf
  if (a >= kF16MinNormal) {
    // Rebias the exponent (127 -> 15) and round the 13 dropped fraction bits to nearest even;
    // a carry out of the fraction correctly bumps the exponent.
    a += ((a >> 13) & 1u) + 0xfffu - ((127u - 15u) << 23);
    return static_cast<std::uint16_t>(sign | (a >> 13));
  }
  if (a <= kF16RoundsToZero) return sign;
  // Subnormal result in units of 2^-24: significand m (24 bits) times 2^(e - 126).
  const std::uint32_t e = a >> 23;  // 102..112
  const std::uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126u - e;  // 14..24
  std::uint32_t q = m >> shift;
  const std::uint32_t rem = m & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u) != 0)) ++q;  // may carry into the smallest normal
  return static_cast<std::uint16_t>(sign | q);
}

float f16_to_float_scalar(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t man = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1fu) {
    // inf, or NaN made quiet (as vcvtph2ps does for a signalling NaN).
    bits = sign | kFloatExpMask | (man << 13) | (man != 0 ? 0x400000u : 0u);
  } else if (exp != 0) {
    bits = sign | ((exp + 127u - 15u) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {
    // Subnormal man * 2^-24: normalise so that the leading one is the implicit bit.
    std::uint32_t e = 127u - 14u;
    while ((man & 0x400u) == 0) {
      man <<= 1;
      --e;
    }
    bits = sign | (e << 23) | ((man & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

void to_float_range(float* out, const std::uint16_t* in, std::int64_t n, HalfFormat f) {
  if (f == HalfFormat::bf16) {
    for (std::int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(in[i]);
    return;
  }
  std::int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
#endif
  for (; i < n; ++i) out[i] = f16_to_float_scalar(in[i]);
}

void to_half_range(std::uint16_t* out, const float* in, std::int64_t n, HalfFormat f) {
  if (f == HalfFormat::bf16) {
    for (std::int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(in[i]);
    return;
  }
  std::int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
#endif
  for (; i < n; ++i) out[i] = float_to_f16(in[i]);
}

// Calls range(begin, end) over [0, n) in chunks, on a thread team when n is large.
template <class Range>
void for_chunks(std::int64_t n, Range&& range) {
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  detail::parallel_for(chunks, n >= kParallelFrom, [=](std::int64_t c) {
    const std::int64_t begin = c * kChunk;
    range(begin, std::min(n, begin + kChunk));
  });
}

// Number of chunks of x [n] holding an element whose exponent field (bits(x[i]) & mask) is
// all ones, i.e. an inf or a NaN. The inner loop has no early exit so that it vectorises.
template <class T, class Bits>
std::int64_t chunks_with_all_ones_exponent(const T* x, std::int64_t n, Bits mask) {
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  const auto sums = detail::parallel_sums(chunks, n >= kParallelFrom, [=](std::int64_t c, detail::Sums& s) {
    const std::int64_t begin = c * kChunk, end = std::min(n, begin + kChunk);
    // (bits & mask) <= mask always, so the largest exponent field equals mask exactly when
    // some element is inf or NaN; a max reduction vectorises where a flag would not.
    Bits largest = 0;
    for (std::int64_t i = begin; i < end; ++i) {
      largest = std::max<Bits>(largest, std::bit_cast<Bits>(x[i]) & mask);
    }
    s.count += largest == mask ? 1 : 0;
  });
  return sums.count;
}

}  // namespace

std::uint16_t float_to_f16(float x) { return f16_from_bits(std::bit_cast<std::uint32_t>(x)); }

float f16_to_float(std::uint16_t h) { return f16_to_float_scalar(h); }

void convert_half_to_float(float* out, const std::uint16_t* in, std::int64_t n, HalfFormat f) {
  for_chunks(n, [=](std::int64_t b, std::int64_t e) { to_float_range(out + b, in + b, e - b, f); });
}

void convert_float_to_half(std::uint16_t* out, const float* in, std::int64_t n, HalfFormat f) {
  for_chunks(n, [=](std::int64_t b, std::int64_t e) { to_half_range(out + b, in + b, e - b, f); });
}

void round_float_to_half(std::uint16_t* out, float* x, std::int64_t n, HalfFormat f) {
  // Both conversions a chunk at a time (96 KiB of the two widths, in L2): the memory is
  // crossed once, by the rounding.
  for_chunks(n, [=](std::int64_t b, std::int64_t e) {
    to_half_range(out + b, x + b, e - b, f);
    to_float_range(x + b, out + b, e - b, f);
  });
}

bool all_finite(const float* x, std::int64_t n) { return chunks_with_all_ones_exponent(x, n, kFloatExpMask) == 0; }

bool all_finite(const std::uint16_t* x, std::int64_t n, HalfFormat f) {
  const auto mask = static_cast<std::uint16_t>(f == HalfFormat::f16 ? 0x7c00u : 0x7f80u);
  return chunks_with_all_ones_exponent(x, n, mask) == 0;
}

namespace detail {

void convert_half_to_float_scalar(float* out, const std::uint16_t* in, std::int64_t n, HalfFormat f) {
  for (std::int64_t i = 0; i < n; ++i) {
    out[i] = f == HalfFormat::f16 ? f16_to_float(in[i]) : bf16_to_float(in[i]);
  }
}

void convert_float_to_half_scalar(std::uint16_t* out, const float* in, std::int64_t n, HalfFormat f) {
  for (std::int64_t i = 0; i < n; ++i) {
    out[i] = f == HalfFormat::f16 ? float_to_f16(in[i]) : float_to_bf16(in[i]);
  }
}

bool f16_uses_f16c() {
#if defined(__F16C__)
  return true;
#else
  return false;
#endif
}

}  // namespace detail
}  // namespace memtrain::kernels
