#include "kernels/cpu/layernorm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/parallel.hpp"

namespace memtrain::kernels {

template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* gamma, const T* beta, int N,
                       int C, NoDeduce<T> eps) {
  detail::parallel_for(N, N >= 16, [=](std::int64_t n) {
    const T* xr = x + static_cast<std::int64_t>(n) * C;  // [C]
    T* o = out + static_cast<std::int64_t>(n) * C;       // [C]
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < C; ++c) sum += xr[c];
    const T m = sum / C;
    // Two passes (mean, then squared deviations) avoid the cancellation of E[x^2] - E[x]^2.
    T sq = 0;
#pragma omp simd reduction(+ : sq)
    for (int c = 0; c < C; ++c) sq += (xr[c] - m) * (xr[c] - m);
    const T s = T(1) / std::sqrt(sq / C + eps);
#pragma omp simd
    for (int c = 0; c < C; ++c) o[c] = (xr[c] - m) * s * gamma[c] + beta[c];
    mean[n] = m;
    rstd[n] = s;
  });
}

// Note [LayerNorm's parameter sums in the row pass]
// dgamma and dbeta are sums over the N rows. Summed in a second pass (column blocks, Note
// [Column-block parallel reductions]) they read x and dout again from memory: 0.7 of the
// kernel's time at [1024, 768]. Here the rows go in blocks of kRowBlock over the thread team,
// each thread computing its block's input gradients, and the block's rows are then added into
// dgamma and dbeta inside an OpenMP ordered section, in block order and row by row, while they
// are still in L2. Every column's sum is therefore the same chain of additions in row order as
// the two-pass kernel made, with the same expression for each term: bitwise its result, on any
// thread count. (Summing each block on the stack first and adding the block sums halved the
// kernel too, but changed the rounding: a convergence test with no margin for it moved over
// its line, docs/step-breakdown.md.) The ordered sections run one at a time; each is a few
// microseconds against the block's tens, so the team rarely waits on them.
template <class T>
void layernorm_backward(T* dx, NoDeduce<T>* dgamma, NoDeduce<T>* dbeta, const T* dout, const T* x,
                        const T* gamma, const T* mean, const T* rstd, int N, int C) {
  // dx [n, :] += the input gradient of row n (its own loop: one row's sums, then the row).
  const auto row = [=](std::int64_t n) {
    const std::int64_t off = static_cast<std::int64_t>(n) * C;
    const T* xr = x + off;  // [C]
    const T* g = dout + off;  // [C]
    T* d = dx + off;  // [C]
    const T m = mean[n], s = rstd[n];
    // Sixteen partial sums of each, as kernels/cpu/adamw.cpp's Note [Sixteen partial sums]:
    // `omp simd reduction` over two sums compiled to gathers here (GCC 12).
    constexpr int kLanes = 16;
    T acc_g[kLanes] = {}, acc_gx[kLanes] = {};
    int c = 0;
    for (; c + kLanes <= C; c += kLanes) {
      for (int k = 0; k < kLanes; ++k) {
        const T gc = g[c + k] * gamma[c + k];
        acc_g[k] += gc;
        acc_gx[k] += gc * (xr[c + k] - m) * s;
      }
    }
    for (int k = 0; c < C; ++c, ++k) {
      const T gc = g[c] * gamma[c];
      acc_g[k] += gc;
      acc_gx[k] += gc * (xr[c] - m) * s;
    }
    T sum_g = 0, sum_gx = 0;
    for (int k = 0; k < kLanes; ++k) {
      sum_g += acc_g[k];
      sum_gx += acc_gx[k];
    }
    const T mean_g = sum_g / C, mean_gx = sum_gx / C;
#pragma omp simd
    for (int c = 0; c < C; ++c) {
      const T xhat = (xr[c] - m) * s;
      d[c] += s * (g[c] * gamma[c] - mean_g - xhat * mean_gx);
    }
  };
  if (dgamma == nullptr && dbeta == nullptr) {
    detail::parallel_for(N, N >= 16, row);
    return;
  }
  // dgamma [C] += dout[n] * xhat[n], dbeta [C] += dout[n], for the rows [n0, n1) in order.
  const auto add_parameter_rows = [=](std::int64_t n0, std::int64_t n1) {
    for (std::int64_t n = n0; n < n1; ++n) {
      const std::int64_t off = n * C;
      const T* xr = x + off;  // [C]
      const T* g = dout + off;  // [C]
      const T m = mean[n], s = rstd[n];
      if (dgamma != nullptr) {
#pragma omp simd
        for (int c = 0; c < C; ++c) dgamma[c] += g[c] * (xr[c] - m) * s;
      }
      if (dbeta != nullptr) {
#pragma omp simd
        for (int c = 0; c < C; ++c) dbeta[c] += g[c];
      }
    }
  };
  constexpr std::int64_t kRowBlock = 32;  // Note [LayerNorm's parameter sums in the row pass]
  const std::int64_t blocks = (N + kRowBlock - 1) / kRowBlock;
  if (!detail::use_team(N >= 16) || blocks <= 1) {
    // The same blocks in the same order on this thread: each block's rows summed while in cache.
    for (std::int64_t n0 = 0; n0 < N; n0 += kRowBlock) {
      const std::int64_t n1 = std::min<std::int64_t>(N, n0 + kRowBlock);
      for (std::int64_t n = n0; n < n1; ++n) row(n);
      add_parameter_rows(n0, n1);
    }
    return;
  }
#pragma omp parallel for ordered schedule(static, 1) num_threads(num_threads())
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t n0 = b * kRowBlock, n1 = std::min<std::int64_t>(N, n0 + kRowBlock);
    for (std::int64_t n = n0; n < n1; ++n) row(n);
#pragma omp ordered
    add_parameter_rows(n0, n1);
  }
}

#define MEMTRAIN_INSTANTIATE(T)                                                              \
  template void layernorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, int, int, T); \
  template void layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*,    \
                                      const T*, int, int);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(double)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels
