#include "kernels/cpu/layernorm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <omp.h>

#include "kernels/cpu/parallel.hpp"

namespace memtrain::kernels {

template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* gamma, const T* beta, int N, int C,
                       NoDeduce<T> eps) {
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
// kernel's time at [1024, 768]. Here the first thread's share of the rows (N / threads) goes in
// blocks of kRowBlock, each block's rows added into dgamma and dbeta right after their input
// gradients, while they are still in L2; the other threads meanwhile compute the input
// gradients of the remaining rows, which are then added after a barrier, each thread a slice
// of the columns and the rows in order. Every column's sum is therefore the same chain of
// additions in row order as the two-pass kernel made, with the same expression for each term:
// bitwise its result, on any thread count. (Summing each block on the stack first and adding
// the block sums changed the rounding: a convergence test with no margin for it moved over its
// line, docs/step-breakdown.md.)
//
// An OpenMP ordered section over interleaved blocks (every block added in cache, 0.25-0.30 ms
// at [1024, 768] on 2 threads against 0.35-0.39 this way) made the threads hand over 32 times a
// call; on a machine with more runnable threads than cores each hand-over waited for a
// descheduled thread, and the kernel took 130 ms a call (8 ms this way: one barrier; 16 ms as
// two parallel regions).
template <class T>
void layernorm_backward(T* dx, NoDeduce<T>* dgamma, NoDeduce<T>* dbeta, const T* dout, const T* x, const T* gamma,
                        const T* mean, const T* rstd, int N, int C) {
  // dx [n, :] += the input gradient of row n (its own loop: one row's sums, then the row).
  const auto row = [=](std::int64_t n) {
    const std::int64_t off = static_cast<std::int64_t>(n) * C;
    const T* xr = x + off;    // [C]
    const T* g = dout + off;  // [C]
    T* d = dx + off;          // [C]
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
  // dgamma [c0, c1) += dout[n] * xhat[n], dbeta [c0, c1) += dout[n], for the rows [n0, n1) in
  // order.
  const auto add_parameter_rows = [=](std::int64_t n0, std::int64_t n1, int c0, int c1) {
    for (std::int64_t n = n0; n < n1; ++n) {
      const std::int64_t off = n * C;
      const T* xr = x + off;    // [C]
      const T* g = dout + off;  // [C]
      const T m = mean[n], s = rstd[n];
      if (dgamma != nullptr) {
#pragma omp simd
        for (int c = c0; c < c1; ++c) dgamma[c] += g[c] * (xr[c] - m) * s;
      }
      if (dbeta != nullptr) {
#pragma omp simd
        for (int c = c0; c < c1; ++c) dbeta[c] += g[c];
      }
    }
  };
  // Rows [n0, n1) a block at a time: input gradients, then the block's parameter sums.
  const auto rows_and_parameters = [=](std::int64_t n0, std::int64_t n1) {
    constexpr std::int64_t kRowBlock = 32;  // Note [LayerNorm's parameter sums in the row pass]
    for (std::int64_t b0 = n0; b0 < n1; b0 += kRowBlock) {
      const std::int64_t b1 = std::min<std::int64_t>(n1, b0 + kRowBlock);
      for (std::int64_t n = b0; n < b1; ++n) row(n);
      add_parameter_rows(b0, b1, 0, C);
    }
  };
  if (!detail::use_team(N >= 64)) {
    rows_and_parameters(0, N);
    return;
  }
#pragma omp parallel num_threads(num_threads())
  {
    // The team's own size: a call from inside another parallel region gets a team of one.
    const int P = omp_get_num_threads(), t = omp_get_thread_num();
    const std::int64_t h0 = N / P;  // the first thread's rows: [0, h0)
    if (t == 0) {
      rows_and_parameters(0, h0);
    } else {
      const std::int64_t rest = (N - h0 + P - 2) / (P - 1);  // each other thread's rows
      const std::int64_t n0 = std::min<std::int64_t>(N, h0 + (t - 1) * rest);
      const std::int64_t n1 = std::min<std::int64_t>(N, n0 + rest);
      for (std::int64_t n = n0; n < n1; ++n) row(n);
    }
#pragma omp barrier
    // Rows [h0, N): each thread a slice of the columns, whole cache lines of dgamma and dbeta.
    constexpr int kLine = 64 / sizeof(T);
    const int slice = ((C + P - 1) / P + kLine - 1) / kLine * kLine;
    const int c0 = std::min(C, t * slice), c1 = std::min(C, c0 + slice);
    if (c0 < c1) add_parameter_rows(h0, N, c0, c1);
  }
}

#define MEMTRAIN_INSTANTIATE(T)                                                              \
  template void layernorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, int, int, T); \
  template void layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, int, int);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(double)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels
