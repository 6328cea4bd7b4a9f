#pragma once
// How the optimizers read a gradient as f32, whatever its storage: shared by AdamW
// (optimizer.cpp), ZeroAdamW (zero_adamw.cpp) and OneBitAdam (onebit_adam.cpp).
#include <algorithm>
#include <functional>
#include <map>
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
inline void read_grad(float* out, const core::Tensor& grad, std::int64_t lo, std::int64_t n, float multiplier) {
  if (is_half(grad.dtype())) {
    kernels::convert_half_to_float(out, grad.data<std::uint16_t>() + lo, n, format_of(grad.dtype()));
  } else {
    std::copy(grad.data<float>() + lo, grad.data<float>() + lo + n, out);
  }
  if (multiplier != 1.0f) {
    for (std::int64_t i = 0; i < n; ++i) out[i] *= multiplier;
  }
}

// A run of gradients lying back to back in memory, in one dtype: `n` elements from `data`.
struct GradientRun {
  const void* data = nullptr;
  core::DType dtype = core::DType::f32;
  std::int64_t n = 0;
};

// Elements [lo, lo + n) of `grad` as a run.
inline GradientRun run_of(const core::Tensor& grad, std::int64_t lo, std::int64_t n) {
  const void* at = is_half(grad.dtype()) ? static_cast<const void*>(grad.data<std::uint16_t>() + lo)
                                         : static_cast<const void*>(grad.data<float>() + lo);
  return {at, grad.dtype(), n};
}

// Sum of squares (in double) of a run, through the op API on kc's device (16-bit storage read
// as float a chunk at a time on the CPU).
inline double sum_of_squares(const kernels::OpContext& kc, const GradientRun& r) {
  if (!is_half(r.dtype)) return kernels::ops::sum_of_squares(kc, static_cast<const float*>(r.data), r.n);
  return kernels::ops::sum_of_squares_half(kc, static_cast<const std::uint16_t*>(r.data), r.n, format_of(r.dtype));
}

// False when an element of the run is inf or NaN.
inline bool all_finite(const kernels::OpContext& kc, const GradientRun& r) {
  return is_half(r.dtype)
             ? kernels::ops::all_finite_half(kc, static_cast<const std::uint16_t*>(r.data), r.n, format_of(r.dtype))
             : kernels::ops::all_finite(kc, static_cast<const float*>(r.data), r.n);
}

// The same over elements [lo, lo + n) of `grad`.
inline double sum_of_squares(const kernels::OpContext& kc, const core::Tensor& grad, std::int64_t lo, std::int64_t n) {
  return sum_of_squares(kc, run_of(grad, lo, n));
}
inline bool all_finite(const kernels::OpContext& kc, const core::Tensor& grad, std::int64_t lo, std::int64_t n) {
  return all_finite(kc, run_of(grad, lo, n));
}

// The parameters' gradients merged into runs of neighbours in memory that are contiguous, of one
// dtype and in one allocation: gradients packed into a bucket (Note [Gradients live in
// buckets]) merge into about one run a bucket, whatever the parameters' order there. Runs come in
// the order of their first parameter, and never span two allocations (whose adjacency is an
// accident of the allocator), so every data-parallel rank, whose buckets have the same layout,
// forms the same runs in the same order and sums the same bits. Empty gradients are skipped;
// every element of every gradient is in exactly one run.
inline std::vector<GradientRun> contiguous_gradient_runs(const std::vector<models::Parameter>& params) {
  struct Piece {
    GradientRun run;
    const void* allocation;
    std::size_t first;  // the smallest parameter index merged into it
  };
  std::vector<Piece> pieces;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& g = params[i].grad;
    if (g.numel() == 0) continue;
    pieces.push_back({run_of(g, 0, g.numel()), g.allocation_id(), i});
  }
  // Allocations in the order of their first parameter, pieces within one by address.
  std::map<const void*, std::size_t> allocation_order;
  for (const auto& p : pieces) allocation_order.emplace(p.allocation, p.first);  // first seen: smallest index
  std::sort(pieces.begin(), pieces.end(), [&](const Piece& a, const Piece& b) {
    const std::size_t ka = allocation_order.at(a.allocation), kb = allocation_order.at(b.allocation);
    if (ka != kb) return ka < kb;
    return std::less<const void*>()(a.run.data, b.run.data);
  });
  std::vector<Piece> merged;
  for (const auto& piece : pieces) {
    if (!merged.empty()) {
      Piece& last = merged.back();
      const auto* end = static_cast<const char*>(last.run.data) +
                        static_cast<std::size_t>(last.run.n) * core::dtype_size(last.run.dtype);
      if (last.allocation == piece.allocation && last.run.dtype == piece.run.dtype &&
          end == static_cast<const char*>(piece.run.data)) {
        last.run.n += piece.run.n;
        last.first = std::min(last.first, piece.first);
        continue;
      }
    }
    merged.push_back(piece);
  }
  std::stable_sort(merged.begin(), merged.end(), [](const Piece& a, const Piece& b) { return a.first < b.first; });
  std::vector<GradientRun> runs;
  runs.reserve(merged.size());
  for (const auto& m : merged) runs.push_back(m.run);
  return runs;
}

// The runs the global norm and the finiteness check read: on the CPU each parameter's gradient,
// as before (merged runs would group the additions, and so round, differently); on a GPU, where
// each sum waits for the stream and returns to the host, the contiguous runs (about one a bucket
// instead of one a parameter).
inline std::vector<GradientRun> gradient_runs(const kernels::OpContext& kc,
                                              const std::vector<models::Parameter>& params) {
  if (kc.device != kernels::Device::cpu) return contiguous_gradient_runs(params);
  std::vector<GradientRun> runs;
  for (const auto& p : params) runs.push_back(run_of(p.grad, 0, p.grad.numel()));
  return runs;
}

// Sum over every parameter's whole gradient of sum_of_squares (in double).
inline double grads_sum_of_squares(const kernels::OpContext& kc, const std::vector<models::Parameter>& params) {
  double sum = 0.0;
  for (const auto& r : gradient_runs(kc, params)) sum += sum_of_squares(kc, r);
  return sum;
}

// False when any element of any parameter's gradient is inf or NaN.
inline bool grads_all_finite(const kernels::OpContext& kc, const std::vector<models::Parameter>& params) {
  for (const auto& r : gradient_runs(kc, params)) {
    if (!all_finite(kc, r)) return false;
  }
  return true;
}

}  // namespace memtrain::train::detail
