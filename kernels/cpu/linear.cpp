#include "kernels/cpu/linear.hpp"

#include <cstdint>

#include "kernels/cpu/column_sum.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/parallel.hpp"

namespace memtrain::kernels {

template <class T>
void linear_forward(T* out, const T* inp, const T* weight, const NoDeduce<T>* bias, int N, int C, int OC) {
  T beta = T(0);
  if (bias != nullptr) {
    detail::parallel_for(N, N >= 64, [=](std::int64_t n) {
      T* row = out + static_cast<std::int64_t>(n) * OC;
#pragma omp simd
      for (int o = 0; o < OC; ++o) row[o] = bias[o];
    });
    beta = T(1);
  }
  matmul(out, inp, weight, N, OC, C, /*trans_a=*/false, /*trans_b=*/true, T(1), beta);  // [N, OC]
}

template <class T>
void linear_backward(NoDeduce<T>* dinp, NoDeduce<T>* dweight, NoDeduce<T>* dbias, const T* dout, const T* inp,
                     const T* weight, int N, int C, int OC) {
  if (dinp != nullptr) {
    matmul(dinp, dout, weight, N, C, OC, false, false, T(1), T(1));  // [N, OC] x [OC, C]
  }
  if (dweight != nullptr) {
    matmul(dweight, dout, inp, OC, C, N, true, false, T(1), T(1));  // [OC, N] x [N, C]
  }
  if (dbias != nullptr) detail::add_column_sums(dbias, dout, N, OC);
}

#define MEMTRAIN_INSTANTIATE(T)                                                     \
  template void linear_forward<T>(T*, const T*, const T*, const T*, int, int, int); \
  template void linear_backward<T>(T*, T*, T*, const T*, const T*, const T*, int, int, int);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(double)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels
