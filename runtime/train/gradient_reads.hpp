#pragma once
// How the optimizers read a gradient as f32, whatever its storage: shared by AdamW
// (optimizer.cpp), ZeroAdamW (zero_adamw.cpp) and OneBitAdam (onebit_adam.cpp).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/half_convert.hpp"
#include "kernels/op_context.hpp"
#include "kernels/ops/optimizer.hpp"
#include "models/parameter.hpp"
#include "runtime/core/dtype.hpp"
#include "runtime/core/tensor.hpp"

namespace memtrain::train::detail {

inline bool is_half(core::DType d) { return d == core::DType::f16 || d == core::DType::bf16; }

inline kernels::HalfFormat format_of(core::DType d) {
  return d == core::DType::f16 ? kernels::HalfFormat::f16 : kernels::HalfFormat::bf16;
}

// Note [Master updates in stack-sized chunks]
// A 16-bit parameter is updated chunk by chunk: its gradient chunk is converted into a float
// array on the stack, the f32 AdamW kernel updates the master and moments of that chunk, and
// the chunk's value is rounded from the new master. Nothing is allocated (the step's
// allocation trace is the fp32 one minus nothing, plus nothing: dry runs stay exact), and each
// chunk stays in cache between the three passes. 4096 floats = 16 KiB per thread.
constexpr std::int64_t kChunk = 4096;

// Elements [lo, lo + n) of `grad` (f32, f16 or bf16) as float into out [n], times multiplier
// (skipped when 1, so f32 stays bitwise). Host memory only: the CPU's staging.
inline void read_grad(float* out, const core::Tensor& grad, std::int64_t lo, std::int64_t n,
                      float multiplier) {
  if (is_half(grad.dtype())) {
    kernels::convert_half_to_float(out, grad.data<std::uint16_t>() + lo, n, format_of(grad.dtype()));
  } else {
    std::copy(grad.data<float>() + lo, grad.data<float>() + lo + n, out);
  }
  if (multiplier != 1.0f) {
    for (std::int64_t i = 0; i < n; ++i) out[i] *= multiplier;
  }
}

// Sum of squares (in double) of elements [lo, lo + n) of `grad`, through the op API on kc's
// device (16-bit storage read as float a chunk at a time on the CPU).
inline double sum_of_squares(const kernels::OpContext& kc, const core::Tensor& grad, std::int64_t lo,
                             std::int64_t n) {
  if (!is_half(grad.dtype())) return kernels::ops::sum_of_squares(kc, grad.data<float>() + lo, n);
  return kernels::ops::sum_of_squares_half(kc, grad.data<std::uint16_t>() + lo, n, format_of(grad.dtype()));
}

// False when an element of [lo, lo + n) of `grad` is inf or NaN.
inline bool all_finite(const kernels::OpContext& kc, const core::Tensor& grad, std::int64_t lo, std::int64_t n) {
  return is_half(grad.dtype())
             ? kernels::ops::all_finite_half(kc, grad.data<std::uint16_t>() + lo, n, format_of(grad.dtype()))
             : kernels::ops::all_finite(kc, grad.data<float>() + lo, n);
}

// Sum over every parameter's whole gradient of sum_of_squares (in double).
inline double grads_sum_of_squares(const kernels::OpContext& kc, const std::vector<models::Parameter>& params) {
  double sum = 0.0;
  for (const auto& p : params) sum += sum_of_squares(kc, p.grad, 0, p.grad.numel());
  return sum;
}

// False when any element of any parameter's gradient is inf or NaN.
inline bool grads_all_finite(const kernels::OpContext& kc, const std::vector<models::Parameter>& params) {
  for (const auto& p : params) {
    if (!all_finite(kc, p.grad, 0, p.grad.numel())) return false;
  }
  return true;
}

}  // namespace memtrain::train::detail
