#pragma once
// Shared helpers of the kernel tests: seeded random tensors, error measures and central
// finite differences in double precision.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace memtrain::kernels::testing {

template <class T = double>
std::vector<T> random_normal(std::size_t n, std::uint64_t seed, double stddev = 1.0) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist(0.0, stddev);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(dist(gen));
  return v;
}

template <class T, class U>
std::vector<T> cast(const std::vector<U>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// max_i |a_i - b_i| / max_i |b_i|: the error relative to the reference's scale, so entries
// that are (nearly) zero do not turn rounding into a large "relative" error.
template <class A, class B>
double max_relative_error(const std::vector<A>& a, const std::vector<B>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// Central finite differences of a scalar loss with respect to every entry of x:
// (L(x + h e_i) - L(x - h e_i)) / 2h. The truncation error is O(h^2 L'''), the rounding error
// O(eps |L| / h); h = 1e-5 keeps both near 1e-10 for the O(1) losses of these tests.
inline std::vector<double> numeric_gradient(std::vector<double>& x, const std::function<double()>& loss,
                                            double h = 1e-5) {
  std::vector<double> g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double plus = loss();
    x[i] = saved - h;
    const double minus = loss();
    x[i] = saved;
    g[i] = (plus - minus) / (2 * h);
  }
  return g;
}

// <a, b>: turns an output tensor into a scalar loss L = sum(out * weights), whose gradient
// with respect to out is `weights`.
inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace memtrain::kernels::testing
