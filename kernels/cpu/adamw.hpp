#pragma once
#include <cstdint>

#include "kernels/cpu/half_convert.hpp"
#include "kernels/cpu/scalar.hpp"

namespace memtrain::kernels {

// One AdamW step (Loshchilov & Hutter 2019, Algorithm 2; torch.optim.AdamW's formulation):
// param -= lr * weight_decay * param; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// param -= lr * (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps). step counts from 1.
// g is grad[i] * grad_scale, rounded to T once: the gradient clipping (and loss unscaling)
// factor applied as the gradient is read, bitwise what scaling grad in place first would give,
// without that extra pass over the gradients (issue 15); grad itself is left unscaled.
// Shapes: param, grad, m, v [n]. Throws std::invalid_argument if step < 1.
template <class T>
void adamw_update(T* param, const T* grad, T* m, T* v, std::int64_t n, NoDeduce<T> lr, NoDeduce<T> beta1,
                  NoDeduce<T> beta2, NoDeduce<T> eps, NoDeduce<T> weight_decay, std::int64_t step,
                  NoDeduce<T> grad_scale = T(1));

// adamw_update<float> on an f32 master whose bf16 copy is rewritten, reading a bf16 gradient:
// g = bf16_to_float(grad[i]) * grad_scale, then master, m, v as adamw_update<float>, then
// value[i] = float_to_bf16(master[i]). In one pass, bitwise the three passes it replaces
// (convert the gradient, update, round the master) but moving each byte once (issue 15).
// Shapes: master, value, grad, m, v [n]. Throws std::invalid_argument if step < 1.
void adamw_update_bf16(float* master, std::uint16_t* value, const std::uint16_t* grad, float* m, float* v,
                       std::int64_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                       std::int64_t step, float grad_scale);

// The same for an f16 copy and gradient: g = f16_to_float(grad[i]) * grad_scale, then master,
// m, v as adamw_update<float>, then value[i] = float_to_f16(master[i]). F16's conversions are
// F16C instructions, not bit operations, so a block of 512 elements at a time is converted into
// a stack buffer, updated and rounded while it is in L1: bitwise the three passes, each byte of
// the five arrays moved once (issue 15). Shapes: master, value, grad, m, v [n]. Throws
// std::invalid_argument if step < 1.
void adamw_update_f16(float* master, std::uint16_t* value, const std::uint16_t* grad, float* m, float* v,
                      std::int64_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                      std::int64_t step, float grad_scale);

// adamw_update_bf16 or adamw_update_f16 by `format` (value and grad both in that format).
void adamw_update_half(float* master, std::uint16_t* value, const std::uint16_t* grad, float* m, float* v,
                       std::int64_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                       std::int64_t step, float grad_scale, HalfFormat format);

// Adam's update with the second moment frozen (1-bit Adam after its freeze step: Tang et al.
// 2021, Algorithm 1), with a momentum m the caller has already formed:
// param = param (1 - lr weight_decay) - lr (m / (1 - b1^step)) / (sqrt(v / (1 - b2^freeze_step)) + eps)
// for every element with v != 0; an element with v == 0 (no gradient ever reached it) keeps its
// param and gets m = 0, as DeepSpeed's exp_avg_mask does. Shapes: param, m, v [n]. Throws
// std::invalid_argument if step < 1 or freeze_step < 1.
template <class T>
void adam_frozen_variance_update(T* param, T* m, const T* v, std::int64_t n, NoDeduce<T> lr, NoDeduce<T> beta1,
                                 NoDeduce<T> beta2, NoDeduce<T> eps, NoDeduce<T> weight_decay, std::int64_t step,
                                 std::int64_t freeze_step);

// Sum of squares of x [n], accumulated in double (for the global gradient norm).
template <class T>
double sum_of_squares(const T* x, std::int64_t n);

// Sum of squares of x [n] read as format f (16-bit gradients), accumulated in double: chunks of
// 4096 converted to float and summed as sum_of_squares sums a chunk.
double sum_of_squares_half(const std::uint16_t* x, std::int64_t n, HalfFormat f);

// x *= s, x [n]. Used for clipping: s = min(1, max_norm / (global_norm + 1e-6)) as in
// torch.nn.utils.clip_grad_norm_.
template <class T>
void scale_inplace(T* x, std::int64_t n, NoDeduce<T> s);

}  // namespace memtrain::kernels
