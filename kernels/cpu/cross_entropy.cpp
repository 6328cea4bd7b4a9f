#include "kernels/cpu/cross_entropy.hpp"

#include <Eigen/Core>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cpu/parallel.hpp"

namespace memtrain::kernels {
namespace {

void check_targets(const std::int32_t* targets, int M, int V) {
  for (int m = 0; m < M; ++m) {
    if (targets[m] < 0 || targets[m] >= V) {
      throw std::out_of_range("softmax_cross_entropy: targets[" + std::to_string(m) + "] = " +
                              std::to_string(targets[m]) + "; expected a class in [0, " + std::to_string(V) + ")");
    }
  }
}

// Row maximum, vectorized (no branch per element).
template <class T>
T row_max(const T* x, int V) {
  T mx = x[0];
#pragma omp simd reduction(max : mx)
  for (int j = 0; j < V; ++j) mx = x[j] > mx ? x[j] : mx;
  return mx;
}

// Whether the first maximum of the row is the target (torch.argmax's tie rule): the target
// must reach the maximum and no earlier entry may. Rarely needs the scan, unlike an argmax.
template <class T>
bool argmax_is_target(const T* x, T mx, int target) {
  if (x[target] != mx) return false;
  for (int j = 0; j < target; ++j) {
    if (x[j] == mx) return false;
  }
  return true;
}

// -log p(target) = (max - target_logit) + log(sum_j exp(x_j - max)). The difference of the two
// logits is taken first: it is exact for nearby values, whereas log(sum) + max would round to
// the float spacing of the logits (1e-3 at 1e4).
template <class T>
double row_loss(T mx, T target_logit, T sum) {
  return static_cast<double>(mx - target_logit) + std::log(static_cast<double>(sum));
}

}  // namespace

template <class T>
double softmax_cross_entropy_forward_backward(NoDeduce<T>* dlogits, const T* logits, const std::int32_t* targets, int M,
                                              int V, NoDeduce<T> grad_scale, std::int64_t* num_correct) {
  check_targets(targets, M, V);
  const detail::Sums sums = detail::parallel_sums(M, M >= 4, [=](std::int64_t row, detail::Sums& acc) {
    const int m = static_cast<int>(row);
    const std::int64_t off = static_cast<std::int64_t>(m) * V;
    const T* x = logits + off;  // [V]
    T* d = dlogits + off;       // [V], may be x itself
    const T mx = row_max(x, V);
    const T target_logit = x[targets[m]];  // read before d overwrites x
    acc.count = argmax_is_target(x, mx, targets[m]) ? 1 : 0;
    Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> e(d, V);
    e = (Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(x, V) - mx).exp();
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < V; ++j) sum += d[j];
    acc.value = row_loss(mx, target_logit, sum);
    const T s = grad_scale / sum;
#pragma omp simd
    for (int j = 0; j < V; ++j) d[j] *= s;
    d[targets[m]] -= grad_scale;
  });
  if (num_correct != nullptr) *num_correct = sums.count;
  return sums.value;
}

template <class T>
double softmax_cross_entropy_forward(const T* logits, const std::int32_t* targets, int M, int V,
                                     std::int64_t* num_correct) {
  check_targets(targets, M, V);
  const detail::Sums sums = detail::parallel_sums(M, M >= 4, [=](std::int64_t row, detail::Sums& acc) {
    const int m = static_cast<int>(row);
    const T* x = logits + static_cast<std::int64_t>(m) * V;  // [V]
    const T mx = row_max(x, V);
    const T sum = (Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(x, V) - mx).exp().sum();
    acc.value = row_loss(mx, x[targets[m]], sum);
    acc.count = argmax_is_target(x, mx, targets[m]) ? 1 : 0;
  });
  if (num_correct != nullptr) *num_correct = sums.count;
  return sums.value;
}

#define MEMTRAIN_INSTANTIATE(T)                                                                             \
  template double softmax_cross_entropy_forward_backward<T>(T*, const T*, const std::int32_t*, int, int, T, \
                                                            std::int64_t*);                                 \
  template double softmax_cross_entropy_forward<T>(const T*, const std::int32_t*, int, int, std::int64_t*);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(double)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels
