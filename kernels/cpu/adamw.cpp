#include "kernels/cpu/adamw.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cpu/half_convert.hpp"
#include "kernels/cpu/parallel.hpp"

namespace memtrain::kernels {
namespace {

// Elementwise work is split into chunks of this many elements (one task each).
constexpr std::int64_t kChunk = 32768;

// body(lo, hi) over chunks of [0, n), on a thread team when there is more than one chunk.
template <class Body>
void for_chunks(std::int64_t n, Body&& body) {
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  detail::parallel_for(chunks, chunks > 1, [&](std::int64_t c) { body(c * kChunk, std::min(n, (c + 1) * kChunk)); });
}

}  // namespace

namespace {

// The step's constants of adamw_update (torch.optim.AdamW's formulation). Bias corrections in
// double: beta2^step underflows gracefully and 1 - beta2^step is tiny early on (torch computes
// these in Python floats, i.e. double, too). Throws std::invalid_argument if step < 1.
template <class T>
struct AdamwConstants {
  T beta1, beta2, one_minus_b1, one_minus_b2, eps, step_size, inv_sqrt_bc2, decay;

  AdamwConstants(T lr, T b1, T b2, T epsilon, T weight_decay, std::int64_t step, const char* who)
      : beta1(b1), beta2(b2), one_minus_b1(T(1) - b1), one_minus_b2(T(1) - b2), eps(epsilon) {
    if (step < 1) {
      throw std::invalid_argument(std::string(who) + ": step = " + std::to_string(step) +
                                  "; expected the 1-based count of updates");
    }
    const double bc1 = 1.0 - std::pow(static_cast<double>(b1), static_cast<double>(step));
    const double bc2 = 1.0 - std::pow(static_cast<double>(b2), static_cast<double>(step));
    step_size = static_cast<T>(lr / bc1);
    inv_sqrt_bc2 = static_cast<T>(1.0 / std::sqrt(bc2));
    decay = T(1) - lr * weight_decay;
  }
};

// The update of elements [lo, hi), the gradient read as grad_at(i) (already scaled) and each
// new parameter handed to store(i, p) as well: the one loop body of every form below, so that
// they give the same bits.
template <class T, class GradAt, class Store>
inline void adamw_range(const AdamwConstants<T>& k, T* param, T* m, T* v, std::int64_t lo, std::int64_t hi,
                        GradAt grad_at, Store store) {
#pragma omp simd
  for (std::int64_t i = lo; i < hi; ++i) {
    const T g = grad_at(i);
    const T mi = k.beta1 * m[i] + k.one_minus_b1 * g;
    const T vi = k.beta2 * v[i] + k.one_minus_b2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const T p = param[i] * k.decay - k.step_size * mi / (std::sqrt(vi) * k.inv_sqrt_bc2 + k.eps);
    param[i] = p;
    store(i, p);
  }
}

template <class T, class GradAt, class Store>
void adamw_loop(T* param, T* m, T* v, std::int64_t n, T lr, T beta1, T beta2, T eps, T weight_decay, std::int64_t step,
                const char* who, GradAt grad_at, Store store) {
  const AdamwConstants<T> k(lr, beta1, beta2, eps, weight_decay, step, who);
  for_chunks(n, [=, &k](std::int64_t lo, std::int64_t hi) { adamw_range(k, param, m, v, lo, hi, grad_at, store); });
}

// Elements of the f16 form's per-thread float buffers (2 KiB each): a block is converted in,
// updated and rounded out while it is in L1.
constexpr std::int64_t kF16Block = 512;

}  // namespace

template <class T>
void adamw_update(T* param, const T* grad, T* m, T* v, std::int64_t n, NoDeduce<T> lr, NoDeduce<T> beta1,
                  NoDeduce<T> beta2, NoDeduce<T> eps, NoDeduce<T> weight_decay, std::int64_t step,
                  NoDeduce<T> grad_scale) {
  adamw_loop<T>(
      param, m, v, n, lr, beta1, beta2, eps, weight_decay, step, "adamw_update",
      [=](std::int64_t i) { return grad[i] * grad_scale; }, [](std::int64_t, T) {});
}

void adamw_update_bf16(float* master, std::uint16_t* value, const std::uint16_t* grad, float* m, float* v,
                       std::int64_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                       std::int64_t step, float grad_scale) {
  adamw_loop<float>(
      master, m, v, n, lr, beta1, beta2, eps, weight_decay, step, "adamw_update_bf16",
      [=](std::int64_t i) { return bf16_to_float(grad[i]) * grad_scale; },
      [=](std::int64_t i, float p) { value[i] = float_to_bf16(p); });
}

void adamw_update_f16(float* master, std::uint16_t* value, const std::uint16_t* grad, float* m, float* v,
                      std::int64_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                      std::int64_t step, float grad_scale) {
  const AdamwConstants<float> k(lr, beta1, beta2, eps, weight_decay, step, "adamw_update_f16");
  for_chunks(n, [=, &k](std::int64_t lo, std::int64_t hi) {
    alignas(64) float g[kF16Block];  // [block] the gradient, as float
    for (std::int64_t b = lo; b < hi; b += kF16Block) {
      const std::int64_t len = std::min(kF16Block, hi - b);
      // Under kParallelFrom elements the conversions run on this thread (half_convert.cpp).
      convert_half_to_float(g, grad + b, len, HalfFormat::f16);
      const float* gp = g;
      adamw_range(
          k, master, m, v, b, b + len, [=](std::int64_t i) { return gp[i - b] * grad_scale; },
          [](std::int64_t, float) {});
      convert_float_to_half(value + b, master + b, len, HalfFormat::f16);
    }
  });
}

void adamw_update_half(float* master, std::uint16_t* value, const std::uint16_t* grad, float* m, float* v,
                       std::int64_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                       std::int64_t step, float grad_scale, HalfFormat format) {
  if (format == HalfFormat::bf16) {
    adamw_update_bf16(master, value, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, step, grad_scale);
  } else {
    adamw_update_f16(master, value, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, step, grad_scale);
  }
}

template <class T>
void adam_frozen_variance_update(T* param, T* m, const T* v, std::int64_t n, NoDeduce<T> lr, NoDeduce<T> beta1,
                                 NoDeduce<T> beta2, NoDeduce<T> eps, NoDeduce<T> weight_decay, std::int64_t step,
                                 std::int64_t freeze_step) {
  if (step < 1 || freeze_step < 1) {
    throw std::invalid_argument("adam_frozen_variance_update: step = " + std::to_string(step) +
                                ", freeze_step = " + std::to_string(freeze_step) + "; expected both >= 1");
  }
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(freeze_step));
  const T step_size = static_cast<T>(lr / bc1);
  const T inv_sqrt_bc2 = static_cast<T>(1.0 / std::sqrt(bc2));
  const T decay = T(1) - lr * weight_decay;
  for_chunks(n, [=](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) {
      if (v[i] == T(0)) {
        m[i] = T(0);
        continue;
      }
      param[i] = param[i] * decay - step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_bc2 + eps);
    }
  });
}

namespace {

// Note [Sixteen partial sums]
// `omp simd reduction` compiled to gathers here (GCC 12), 7 GB/s: the global norm took longer
// than AdamW itself (issue 15). Sixteen explicit partial sums, each a plain in-order double
// sum, vectorize as straight loads and give the same bits on every instruction set.
template <class T>
double sum_of_squares_range(const T* x, std::int64_t lo, std::int64_t hi) {
  constexpr int kLanes = 16;
  double acc[kLanes] = {};
  std::int64_t i = lo;
  for (; i + kLanes <= hi; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      const double xi = static_cast<double>(x[i + k]);
      acc[k] += xi * xi;
    }
  }
  for (int k = 0; i < hi; ++i, ++k) {
    const double xi = static_cast<double>(x[i]);
    acc[k] += xi * xi;
  }
  double s = 0;
  for (int k = 0; k < kLanes; ++k) s += acc[k];
  return s;
}

}  // namespace

template <class T>
double sum_of_squares(const T* x, std::int64_t n) {
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  return detail::parallel_sums(chunks, chunks > 1,
                               [=](std::int64_t c, detail::Sums& sums) {
                                 const std::int64_t lo = c * kChunk, hi = std::min(n, lo + kChunk);
                                 sums.value = sum_of_squares_range(x, lo, hi);
                               })
      .value;
}

double sum_of_squares_half(const std::uint16_t* x, std::int64_t n, HalfFormat f) {
  // 4096 elements (16 KiB of floats) converted onto the stack at a time and summed while in
  // L1, on the thread team as the f32 sum is (one thread read 16-bit gradients at a third of
  // the f32 speed). With a team the order of the chunks' additions depends on the thread
  // count, as sum_of_squares's does.
  constexpr std::int64_t kHalfChunk = 4096;
  const std::int64_t chunks = (n + kHalfChunk - 1) / kHalfChunk;
  return detail::parallel_sums(chunks, chunks > 8,
                               [=](std::int64_t c, detail::Sums& sums) {
                                 float buf[kHalfChunk];
                                 const std::int64_t at = c * kHalfChunk, len = std::min(kHalfChunk, n - at);
                                 convert_half_to_float(buf, x + at, len, f);
                                 sums.value = sum_of_squares_range(buf, 0, len);
                               })
      .value;
}

template <class T>
void scale_inplace(T* x, std::int64_t n, NoDeduce<T> s) {
  for_chunks(n, [=](std::int64_t lo, std::int64_t hi) {
#pragma omp simd
    for (std::int64_t i = lo; i < hi; ++i) x[i] *= s;
  });
}

#define MEMTRAIN_INSTANTIATE(T)                                                                             \
  template void adamw_update<T>(T*, const T*, T*, T*, std::int64_t, T, T, T, T, T, std::int64_t, T);        \
  template void adam_frozen_variance_update<T>(T*, T*, const T*, std::int64_t, T, T, T, T, T, std::int64_t, \
                                               std::int64_t);                                               \
  template double sum_of_squares<T>(const T*, std::int64_t);                                                \
  template void scale_inplace<T>(T*, std::int64_t, T);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(double)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels
