#include "kernels/cpu/softmax.hpp"

#include <Eigen/Core>
#include <cstdint>
#include <limits>

#include "kernels/cpu/parallel.hpp"

namespace memtrain::kernels {
namespace detail {

template <class T>
void masked_softmax_row(T* out, const T* inp, const T* key_mask, int cols, T scale) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  T mx = kNegInf;
  if (key_mask == nullptr) {
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < cols; ++j) mx = inp[j] * scale > mx ? inp[j] * scale : mx;
  } else {
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < cols; ++j) {
      const T s = key_mask[j] != T(0) ? inp[j] * scale : kNegInf;
      mx = s > mx ? s : mx;
    }
  }
  if (mx == kNegInf) {  // every key masked
    for (int j = 0; j < cols; ++j) out[j] = T(0);
    return;
  }
  // Shift (masked keys to -inf), exponentiate with Eigen's vectorized exp, then zero masked
  // keys exactly: Eigen's SIMD exp clamps -inf to a tiny positive value instead of 0.
  if (key_mask == nullptr) {
#pragma omp simd
    for (int j = 0; j < cols; ++j) out[j] = inp[j] * scale - mx;
  } else {
#pragma omp simd
    for (int j = 0; j < cols; ++j) out[j] = key_mask[j] != T(0) ? inp[j] * scale - mx : kNegInf;
  }
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> o(out, cols);
  o = o.exp();
  T sum = 0;
  if (key_mask == nullptr) {
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < cols; ++j) sum += out[j];
  } else {
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < cols; ++j) {
      out[j] = key_mask[j] != T(0) ? out[j] : T(0);
      sum += out[j];
    }
  }
  const T inv = T(1) / sum;
#pragma omp simd
  for (int j = 0; j < cols; ++j) out[j] *= inv;
}

template <class T>
void softmax_backward_row(T* dinp, const T* dout, const T* probs, int cols, T scale) {
  T dot = 0;
#pragma omp simd reduction(+ : dot)
  for (int j = 0; j < cols; ++j) dot += dout[j] * probs[j];
#pragma omp simd
  for (int j = 0; j < cols; ++j) dinp[j] = scale * probs[j] * (dout[j] - dot);
}

}  // namespace detail

template <class T>
void masked_softmax_forward(T* out, const T* inp, const NoDeduce<T>* key_mask, int rows, int cols, int rows_per_mask,
                            NoDeduce<T> scale) {
  const int per_mask = rows_per_mask > 0 ? rows_per_mask : 1;
  detail::parallel_for(rows, rows >= 32, [=](std::int64_t r) {
    const std::int64_t off = static_cast<std::int64_t>(r) * cols;
    const T* m = key_mask ? key_mask + static_cast<std::int64_t>(r / per_mask) * cols : nullptr;
    detail::masked_softmax_row(out + off, inp + off, m, cols, scale);
  });
}

template <class T>
void masked_softmax_backward(NoDeduce<T>* dinp, const T* dout, const T* probs, int rows, int cols, NoDeduce<T> scale) {
  detail::parallel_for(rows, rows >= 32, [=](std::int64_t r) {
    const std::int64_t off = static_cast<std::int64_t>(r) * cols;
    detail::softmax_backward_row(dinp + off, dout + off, probs + off, cols, scale);
  });
}

#define MEMTRAIN_INSTANTIATE(T)                                                      \
  template void masked_softmax_forward<T>(T*, const T*, const T*, int, int, int, T); \
  template void masked_softmax_backward<T>(T*, const T*, const T*, int, int, T);     \
  template void detail::masked_softmax_row<T>(T*, const T*, const T*, int, T);       \
  template void detail::softmax_backward_row<T>(T*, const T*, const T*, int, T);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(double)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels
