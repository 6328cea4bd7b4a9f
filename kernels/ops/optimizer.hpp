#pragma once
// The optimizer's kernels through the op API: AdamW (Loshchilov & Hutter 2019, Algorithm 2),
// clipping's scaling, the global norm's sum of squares and the fp16 loss scaler's finiteness
// check; kernels/cpu/adamw and kernels/cpu/half_convert, or their twins in kernels/cuda/adamw.
#include <cstddef>
#include <cstdint>

#include "kernels/half_format.hpp"
#include "kernels/op_context.hpp"

namespace memtrain::kernels::ops {

// One AdamW step on fp32 param, grad, m, v [n] with g = grad[i] * grad_scale, as
// kernels::adamw_update<float>; the GPU's is bitwise the CPU's (Note [No fused multiply-add in
// AdamW]). Throws std::invalid_argument if step < 1.
void adamw_update(const OpContext& kc, float* param, const float* grad, float* m, float* v, std::int64_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, std::int64_t step, float grad_scale);

// The same on an fp32 master whose 16-bit copy `value` is rewritten, reading a gradient stored
// in the same format f (kernels::adamw_update_half). master, value, grad, m, v [n]. Throws
// std::invalid_argument if step < 1.
void adamw_update_half(const OpContext& kc, float* master, std::uint16_t* value, const std::uint16_t* grad, float* m,
                       float* v, std::int64_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                       std::int64_t step, float grad_scale, HalfFormat f);

// x [n] *= s (clip_grad_norm's factor).
void scale_inplace(const OpContext& kc, float* x, std::int64_t n, float s);

// Sum of squares of x [n] in double (the global gradient norm). The CPU's and the GPU's sums
// add in different orders: equal within rounding. On the GPU this waits for the stream and
// returns the host value.
double sum_of_squares(const OpContext& kc, const float* x, std::int64_t n);
// The same over 16-bit storage x [n] of format f.
double sum_of_squares_half(const OpContext& kc, const std::uint16_t* x, std::int64_t n, HalfFormat f);

// True when no element of x [n] is inf or NaN. On the GPU this waits for the stream.
bool all_finite(const OpContext& kc, const float* x, std::int64_t n);
// The same over 16-bit storage x [n] of format f.
bool all_finite_half(const OpContext& kc, const std::uint16_t* x, std::int64_t n, HalfFormat f);

// Bytes of the GPU's fixed scratch (the KernelContext's) that sum_of_squares and all_finite (and
// their _half forms) need on `device`, whatever n: their per-block partial results. 0 on the
// CPU. Throws std::runtime_error for a GPU in a build without CUDA.
std::size_t reduction_workspace_bytes(Device device);

}  // namespace memtrain::kernels::ops
