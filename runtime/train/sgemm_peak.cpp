#include "runtime/train/sgemm_peak.hpp"

#include <algorithm>
#include <chrono>

#include "kernels/cpu/matmul.hpp"
#include "runtime/core/tags.hpp"
#include "runtime/core/tensor.hpp"

namespace memtrain::train {

double measure_sgemm_peak_flops(core::Context& ctx, int n, int repeats) {
  const auto tag = core::tags().temporary;
  auto a = core::Tensor::zeros(ctx, {n, n}, core::DType::f32, tag);  // [n, n]
  auto b = core::Tensor::zeros(ctx, {n, n}, core::DType::f32, tag);  // [n, n]
  auto c = core::Tensor::zeros(ctx, {n, n}, core::DType::f32, tag);  // [n, n]
  // Non-trivial values: some BLAS paths are faster on zeros (denormal-free, but keep it honest).
  float* pa = a.data<float>();
  float* pb = b.data<float>();
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    pa[i] = static_cast<float>((i * 7) % 13) * 0.01f;
    pb[i] = static_cast<float>((i * 5) % 11) * 0.01f;
  }
  kernels::matmul(c.data<float>(), pa, pb, n, n, n, false, false);  // warm-up
  double best_s = 1e30;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    kernels::matmul(c.data<float>(), pa, pb, n, n, n, false, false);
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    best_s = std::min(best_s, dt.count());
  }
  return 2.0 * n * static_cast<double>(n) * n / best_s;
}

}  // namespace memtrain::train
