#include "kernels/cpu/dropout.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/parallel.hpp"

namespace memtrain::kernels {

std::uint32_t dropout_keep_threshold(float p) {
  return static_cast<std::uint32_t>(std::ceil(static_cast<double>(p) * 16777216.0)) << 8;
}

namespace {

// Elements per parallel task: a multiple of 4 (one Philox block per 4 elements).
constexpr long kTask = 4096;

// out = dropout(inp) [+ residual], a task of kTask elements of a row at a time on the thread
// team; residual null for plain dropout. Requires 0 <= p < 1.
template <class T>
void dropout_tasks(T* out, const T* inp, const T* residual, int rows, long per_sample, float p, const RngKey& key,
                   std::uint64_t first_sample, std::uint64_t first_element) {
  const std::int64_t total = static_cast<std::int64_t>(rows) * per_sample;
  const PhiloxStream stream(key);
  const long tasks_per_row = (per_sample + kTask - 1) / kTask;
  const std::int64_t tasks = static_cast<std::int64_t>(rows) * tasks_per_row;
  detail::parallel_for(tasks, total >= 16384, [=](std::int64_t task) {
    const int r = static_cast<int>(task / tasks_per_row);
    const long e0 = (task % tasks_per_row) * kTask;
    const long n = per_sample - e0 < kTask ? per_sample - e0 : kTask;
    const std::int64_t off = static_cast<std::int64_t>(r) * per_sample + e0;
    T* o = out + off;  // [n]
    if (o != inp + off) std::memcpy(o, inp + off, sizeof(T) * n);
    if (p > 0.0f) apply_dropout_mask(o, n, p, stream, first_sample + r, first_element + e0);
    if (residual != nullptr) {
      const T* res = residual + off;  // [n]
#pragma omp simd
      for (long i = 0; i < n; ++i) o[i] += res[i];
    }
  });
}

template <class T>
void dropout(T* out, const T* inp, int rows, long per_sample, float p, const RngKey& key, std::uint64_t first_sample,
             std::uint64_t first_element) {
  if (!(p >= 0.0f)) {
    throw std::invalid_argument("dropout: p = " + std::to_string(p) + "; expected a probability in [0, 1)");
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
  dropout_tasks<T>(out, inp, nullptr, rows, per_sample, p, key, first_sample, first_element);
}

}  // namespace

namespace {

// The Philox words of elements [first_element, first_element + n) of `sample`, in element
// order: block(i, words) for each kSpan-element span starting at i (kLanes Philox blocks at
// once, Note [Many Philox blocks at once]; words a local array, so block's loop vectorizes), and
// one(i, word) for the elements before the first whole Philox block and those of a last, partial
// span (whose words come from one more whole span: cheaper than Philox blocks one at a time).
constexpr int kSpan = 4 * PhiloxStream::kLanes;
using SpanWords = std::uint32_t[kSpan];

template <class Block, class One>
void for_mask_words(std::int64_t n, const PhiloxStream& stream, std::uint64_t sample, std::uint64_t first_element,
                    Block&& block, One&& one) {
  std::int64_t i = 0;
  std::uint64_t e = first_element;
  if ((e & 3) != 0 && n > 0) {
    const auto r = stream.block(sample, e >> 2);
    for (unsigned lane = e & 3; lane < 4 && i < n; ++lane, ++i, ++e) one(i, r[lane]);
  }
  constexpr int kLanes = PhiloxStream::kLanes;
  for (; i < n; i += kSpan, e += kSpan) {
    PhiloxStream::Words r;
    stream.blocks(sample, e >> 2, r);
    alignas(64) SpanWords words;  // element 4 j + w is word w of block j
    for (int j = 0; j < kLanes; ++j) {
      for (int w = 0; w < 4; ++w) words[4 * j + w] = r[w][j];
    }
    if (i + kSpan <= n) {
      block(i, words);
    } else {
      for (int k = 0; i + k < n; ++k) one(i + k, words[k]);
    }
  }
}

}  // namespace

namespace {

// Whether the element whose Philox word is `word` is kept: its uniform (the top 24 bits) is at
// least p, as dropout_keep_threshold(p) encodes it.
inline bool kept(std::uint32_t word, std::uint32_t threshold) { return (word & 0xffffff00u) >= threshold; }

// xb[k] = kept(words[k]) ? xb[k] * scale : 0 over one span. A function of its own with
// restrict pointers: inside apply_mask_to's lambda GCC could not prove that the stores leave the
// captured pointers alone, and left the loop scalar (1.6 ns an element at 256-element spans).
template <class T>
void mask_span(T* __restrict xb, const std::uint32_t* __restrict words, std::uint32_t threshold, T scale) {
#pragma omp simd
  for (int k = 0; k < kSpan; ++k) {
    const T v = xb[k];
    xb[k] = kept(words[k], threshold) ? v * scale : T(0);
  }
}

// The mask of apply_dropout_mask applied to K arrays at once, its words drawn once.
template <class T, int K>
void apply_mask_to(T* const (&xs)[K], std::int64_t n, float p, const PhiloxStream& stream, std::uint64_t sample,
                   std::uint64_t first_element) {
  const T scale = T(1) / (T(1) - T(p));
  const std::uint32_t threshold = dropout_keep_threshold(p);
  T* x[K];
  for (int a = 0; a < K; ++a) x[a] = xs[a];
  for_mask_words(
      n, stream, sample, first_element,
      [=](std::int64_t i, const SpanWords& words) {
        for (int a = 0; a < K; ++a) {
          mask_span(x[a] + i, words, threshold, scale);
        }
      },
      [=](std::int64_t i, std::uint32_t word) {
        for (int a = 0; a < K; ++a) x[a][i] = kept(word, threshold) ? x[a][i] * scale : T(0);
      });
}

}  // namespace

template <class T>
void apply_dropout_mask(T* x, std::int64_t n, float p, const PhiloxStream& stream, std::uint64_t sample,
                        std::uint64_t first_element) {
  T* const xs[1] = {x};
  apply_mask_to<T, 1>(xs, n, p, stream, sample, first_element);
}

template <class T>
void apply_dropout_mask_pair(T* x, T* y, std::int64_t n, float p, const PhiloxStream& stream, std::uint64_t sample,
                             std::uint64_t first_element) {
  T* const xs[2] = {x, y};
  apply_mask_to<T, 2>(xs, n, p, stream, sample, first_element);
}

template <class T>
void dropout_forward(NoDeduce<T>* out, const T* inp, int rows, long per_sample, float p, const RngKey& key,
                     std::uint64_t first_sample, std::uint64_t first_element) {
  dropout(out, inp, rows, per_sample, p, key, first_sample, first_element);
}

template <class T>
void dropout_backward(NoDeduce<T>* dinp, const T* dout, int rows, long per_sample, float p, const RngKey& key,
                      std::uint64_t first_sample, std::uint64_t first_element) {
  // d(x * keep * scale)/dx = keep * scale: the same masked scaling applied to the gradient.
  dropout(dinp, dout, rows, per_sample, p, key, first_sample, first_element);
}

template <class T>
void dropout_residual_forward(NoDeduce<T>* out, const T* inp, const NoDeduce<T>* residual, int rows, long per_sample,
                              float p, const RngKey& key, std::uint64_t first_sample, std::uint64_t first_element) {
  if (!(p >= 0.0f && p < 1.0f)) {
    throw std::invalid_argument("dropout_residual_forward: p = " + std::to_string(p) +
                                "; expected a probability in [0, 1)");
  }
  dropout_tasks<T>(out, inp, residual, rows, per_sample, p, key, first_sample, first_element);
}

#define MEMTRAIN_INSTANTIATE(T)                                                                                     \
  template void dropout_forward<T>(T*, const T*, int, long, float, const RngKey&, std::uint64_t, std::uint64_t);    \
  template void dropout_backward<T>(T*, const T*, int, long, float, const RngKey&, std::uint64_t, std::uint64_t);   \
  template void dropout_residual_forward<T>(T*, const T*, const T*, int, long, float, const RngKey&, std::uint64_t, \
                                            std::uint64_t);                                                         \
  template void apply_dropout_mask<T>(T*, std::int64_t, float, const PhiloxStream&, std::uint64_t, std::uint64_t);  \
  template void apply_dropout_mask_pair<T>(T*, T*, std::int64_t, float, const PhiloxStream&, std::uint64_t,         \
                                           std::uint64_t);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(double)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels
