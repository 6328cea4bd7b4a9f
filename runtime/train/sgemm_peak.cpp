#include "runtime/train/sgemm_peak.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "kernels/cpu/matmul.hpp"
#include "runtime/core/tags.hpp"
#include "runtime/core/tensor.hpp"

namespace memtrain::train {

double measure_sgemm_peak_flops(core::Context& ctx, int n, int repeats) {
  return measure_sgemm_flops(ctx, n, n, n, false, repeats);
}

double measure_sgemm_flops(core::Context& ctx, int m, int n, int k, bool trans_b, int repeats) {
  if (m < 1 || n < 1 || k < 1) {
    std::string what = "measure_sgemm_flops: [";
    what += std::to_string(m) + ", " + std::to_string(k) + "] x [" + std::to_string(k) + ", " + std::to_string(n) +
            "]; expected every dimension >= 1";
    throw std::invalid_argument(what);
  }
  const auto tag = core::tags().temporary;
  auto a = core::Tensor::zeros(ctx, {m, k}, core::DType::f32, tag);                              // [m, k]
  auto b = core::Tensor::zeros(ctx, {trans_b ? n : k, trans_b ? k : n}, core::DType::f32, tag);  // [n, k] or [k, n]
  auto c = core::Tensor::zeros(ctx, {m, n}, core::DType::f32, tag);                              // [m, n]
  // Non-trivial values: some BLAS paths are faster on zeros (denormal-free, but keep it honest).
  float* pa = a.data<float>();
  float* pb = b.data<float>();
  for (std::int64_t i = 0; i < a.numel(); ++i) pa[i] = static_cast<float>((i * 7) % 13) * 0.01f;
  for (std::int64_t i = 0; i < b.numel(); ++i) pb[i] = static_cast<float>((i * 5) % 11) * 0.01f;
  kernels::matmul(c.data<float>(), pa, pb, m, n, k, false, trans_b);  // warm-up
  double best_s = 1e30;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    kernels::matmul(c.data<float>(), pa, pb, m, n, k, false, trans_b);
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    best_s = std::min(best_s, dt.count());
  }
  return 2.0 * m * static_cast<double>(n) * k / best_s;
}

}  // namespace memtrain::train
