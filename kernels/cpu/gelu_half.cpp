#include "kernels/cpu/gelu_half.hpp"

#include <algorithm>

#include "kernels/cpu/column_sum.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/parallel.hpp"

namespace memtrain::kernels {
namespace {

// Elements per stack chunk (Note [16-bit operands converted a chunk at a time]): the float
// backward kernel's own chunk, so each float call sees the same spans it would.
constexpr int kChunk = 2048;

}  // namespace

void bias_gelu_forward_half(std::uint16_t* out, const std::uint16_t* inp, const float* bias, int N, int C,
                            HalfFormat format) {
  detail::parallel_for(N, N >= 16, [=](std::int64_t n) {
    alignas(64) float x[kChunk];  // [w] one chunk of row n
    for (int j0 = 0; j0 < C; j0 += kChunk) {
      const int w = std::min(kChunk, C - j0);
      const std::int64_t off = n * C + j0;
      convert_half_to_float(x, inp + off, w, format);
      bias_gelu_forward(x, x, bias != nullptr ? bias + j0 : nullptr, 1, w);
      convert_float_to_half(out + off, x, w, format);
    }
  });
}

void bias_gelu_backward_half(std::uint16_t* dinp, float* dbias, const std::uint16_t* dout, const std::uint16_t* inp,
                             const float* bias, int N, int C, HalfFormat format) {
  // Column blocks as the float kernel's (Note [Column-block parallel reductions]): each thread
  // owns dbias[c0, c1) and adds the rows in order.
  detail::for_column_blocks(N, C, [=](int c0, int c1) {
    alignas(64) float g[kChunk], x[kChunk], d[kChunk];  // [w] each
    for (int n = 0; n < N; ++n) {
      for (int j0 = c0; j0 < c1; j0 += kChunk) {
        const int w = std::min(kChunk, c1 - j0);
        const std::int64_t off = static_cast<std::int64_t>(n) * C + j0;
        convert_half_to_float(g, dout + off, w, format);
        convert_half_to_float(x, inp + off, w, format);
        std::fill(d, d + w, 0.0f);
        bias_gelu_backward(d, dbias != nullptr ? dbias + j0 : nullptr, g, x, bias != nullptr ? bias + j0 : nullptr, 1,
                           w);
        convert_float_to_half(dinp + off, d, w, format);
      }
    }
  });
}

}  // namespace memtrain::kernels
