#include "kernels/cpu/rows.hpp"

#include <cstring>

#include "kernels/cpu/parallel.hpp"

namespace memtrain::kernels {
namespace {
// Elementwise adds move 12 bytes an element: below about a megabyte a thread team costs more
// than it saves.
constexpr std::int64_t kTeamElements = std::int64_t{1} << 18;
}  // namespace

void add_bias(float* out, const float* bias, std::int64_t N, std::int64_t C) {
  detail::parallel_for(N, N * C >= kTeamElements, [=](std::int64_t n) {
    float* row = out + n * C;
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) row[c] += bias[c];
  });
}

void add_inplace(float* y, const float* x, std::int64_t n) {
  constexpr std::int64_t kChunk = 16384;
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  detail::parallel_for(chunks, n >= kTeamElements, [=](std::int64_t c) {
    const std::int64_t lo = c * kChunk, hi = lo + kChunk < n ? lo + kChunk : n;
#pragma omp simd
    for (std::int64_t i = lo; i < hi; ++i) y[i] += x[i];
  });
}

void gather_rows(void* dst, const void* src, const std::int32_t* rows, std::int64_t M, std::int64_t row_bytes) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  for (std::int64_t m = 0; m < M; ++m) {
    if (rows[m] < 0) {
      std::memset(d + m * row_bytes, 0, static_cast<std::size_t>(row_bytes));
    } else {
      std::memcpy(d + m * row_bytes, s + std::int64_t{rows[m]} * row_bytes, static_cast<std::size_t>(row_bytes));
    }
  }
}

void scatter_add_rows(float* dst, const float* src, const std::int32_t* rows, std::int64_t M, std::int64_t C) {
  for (std::int64_t m = 0; m < M; ++m) {
    if (rows[m] < 0) continue;
    float* row = dst + std::int64_t{rows[m]} * C;
    const float* from = src + m * C;
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) row[c] += from[c];
  }
}

}  // namespace memtrain::kernels
