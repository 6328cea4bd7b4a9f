#include "runtime/train/memcpy_bandwidth.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "kernels/cpu/threads.hpp"

namespace memtrain::train {

double measure_memcpy_bandwidth(std::int64_t buffer_bytes, int repeats) {
  if (buffer_bytes < 1 || repeats < 1) {
    throw std::invalid_argument("measure_memcpy_bandwidth: buffer_bytes = " + std::to_string(buffer_bytes) +
                                ", repeats = " + std::to_string(repeats) + "; expected both >= 1");
  }
  const auto n = static_cast<std::size_t>(buffer_bytes);
  const std::unique_ptr<char[]> src(new char[n]);
  const std::unique_ptr<char[]> dst(new char[n]);
  std::memset(src.get(), 1, n);
  const int threads = std::max(1, kernels::num_threads());
  const auto copy = [&] {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int t = 0; t < threads; ++t) {
      const std::size_t lo = n * static_cast<std::size_t>(t) / threads;
      const std::size_t hi = n * static_cast<std::size_t>(t + 1) / threads;
      std::memcpy(dst.get() + lo, src.get() + lo, hi - lo);
    }
  };
  copy();  // faults dst's pages in
  double best_s = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    copy();
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    best_s = std::min(best_s, dt.count());
  }
  return 2.0 * static_cast<double>(n) / best_s;
}

}  // namespace memtrain::train
