#include "kernels/cpu/dropout.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/threads.hpp"

namespace memtrain::kernels {
namespace {

// Elements per parallel task: a multiple of 4 (one Philox block per 4 elements).
constexpr long kTask = 4096;

template <class T>
void dropout(T* out, const T* inp, int rows, long per_sample, float p, const RngKey& key,
             std::uint64_t first_sample) {
  if (!(p >= 0.0f)) {
    throw std::invalid_argument("dropout: p = " + std::to_string(p) +
                                "; expected a probability in [0, 1)");
  }
  const std::int64_t total = static_cast<std::int64_t>(rows) * per_sample;
  if (p == 0.0f) {
    if (out != inp) std::memmove(out, inp, sizeof(T) * total);
    return;
  }
  if (p >= 1.0f) {
    std::memset(out, 0, sizeof(T) * total);
    return;
  }
  const PhiloxStream stream(key);
  const long tasks_per_row = (per_sample + kTask - 1) / kTask;
  const std::int64_t tasks = static_cast<std::int64_t>(rows) * tasks_per_row;
#pragma omp parallel for schedule(static) num_threads(num_threads()) if (total >= 16384)
  for (std::int64_t task = 0; task < tasks; ++task) {
    const int r = static_cast<int>(task / tasks_per_row);
    const long e0 = (task % tasks_per_row) * kTask;
    const long n = per_sample - e0 < kTask ? per_sample - e0 : kTask;
    const std::int64_t off = static_cast<std::int64_t>(r) * per_sample + e0;
    if (out != inp) std::memcpy(out + off, inp + off, sizeof(T) * n);
    apply_dropout_mask(out + off, n, p, stream, first_sample + r, e0);
  }
}

}  // namespace

template <class T>
void apply_dropout_mask(T* x, std::int64_t n, float p, const PhiloxStream& stream,
                        std::uint64_t sample, std::uint64_t first_element) {
  const T scale = T(1) / (T(1) - T(p));
  stream.for_each_uniform(sample, first_element, n,
                          [&](std::int64_t i, float u) { x[i] = u >= p ? x[i] * scale : T(0); });
}

template <class T>
void dropout_forward(NoDeduce<T>* out, const T* inp, int rows, long per_sample, float p,
                     const RngKey& key, std::uint64_t first_sample) {
  dropout(out, inp, rows, per_sample, p, key, first_sample);
}

template <class T>
void dropout_backward(NoDeduce<T>* dinp, const T* dout, int rows, long per_sample, float p,
                      const RngKey& key, std::uint64_t first_sample) {
  // d(x * keep * scale)/dx = keep * scale: the same masked scaling applied to the gradient.
  dropout(dinp, dout, rows, per_sample, p, key, first_sample);
}

#define MEMTRAIN_INSTANTIATE(T)                                                                    \
  template void dropout_forward<T>(T*, const T*, int, long, float, const RngKey&, std::uint64_t);  \
  template void dropout_backward<T>(T*, const T*, int, long, float, const RngKey&, std::uint64_t); \
  template void apply_dropout_mask<T>(T*, std::int64_t, float, const PhiloxStream&, std::uint64_t, \
                                      std::uint64_t);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(double)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels
