#include "kernels/cpu/layernorm.hpp"

#include <cmath>
#include <cstdint>

#include "kernels/cpu/column_sum.hpp"
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

template <class T>
void layernorm_backward(T* dx, NoDeduce<T>* dgamma, NoDeduce<T>* dbeta, const T* dout, const T* x,
                        const T* gamma, const T* mean, const T* rstd, int N, int C) {
  detail::parallel_for(N, N >= 16, [=](std::int64_t n) {
    const std::int64_t off = static_cast<std::int64_t>(n) * C;
    const T* xr = x + off;
    const T* g = dout + off;
    T* d = dx + off;
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
  });
  if (dgamma == nullptr && dbeta == nullptr) return;
  // Parameter gradients are sums over rows: Note [Column-block parallel reductions].
  detail::for_column_blocks(N, C, [=](int c0, int c1) {
    for (int n = 0; n < N; ++n) {
      const std::int64_t off = static_cast<std::int64_t>(n) * C;
      const T* xr = x + off;
      const T* g = dout + off;
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
  });
}

#define MEMTRAIN_INSTANTIATE(T)                                                              \
  template void layernorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, int, int, T); \
  template void layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*,    \
                                      const T*, int, int);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(double)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels
