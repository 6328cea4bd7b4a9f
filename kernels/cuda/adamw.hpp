#pragma once
// AdamW, clipping's scaling, the global gradient norm's sum of squares and the finiteness check
// on the GPU: the CUDA twins of kernels/cpu/adamw.hpp and of all_finite in
// kernels/cpu/half_convert.hpp.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/kernel_context.hpp"

namespace memtrain::kernels::gpu {

// One AdamW step (Loshchilov & Hutter 2019, Algorithm 2; torch.optim.AdamW's formulation) on
// fp32 param, m, v [n], with g = grad[i] * grad_scale. The bias corrections are computed on the
// host in double as on the CPU, and every product and sum is rounded as the CPU's loop rounds it
// (no fused multiply-add), so the result is bitwise the CPU's. Throws std::invalid_argument if
// step < 1. Asynchronous on ctx.stream.
void adamw_update(const KernelContext& ctx, float* param, const float* grad, float* m, float* v, std::int64_t n,
                  float lr, float beta1, float beta2, float eps, float weight_decay, std::int64_t step,
                  float grad_scale = 1.0f);

// adamw_update on an fp32 master whose bf16 copy `value` is rewritten (round to nearest even),
// reading a bf16 gradient: bitwise kernels::adamw_update_bf16.
void adamw_update_bf16(const KernelContext& ctx, float* master, __nv_bfloat16* value, const __nv_bfloat16* grad,
                       float* m, float* v, std::int64_t n, float lr, float beta1, float beta2, float eps,
                       float weight_decay, std::int64_t step, float grad_scale);

// The same on an fp16 copy and gradient (round to nearest even): bitwise
// kernels::adamw_update_f16.
void adamw_update_f16(const KernelContext& ctx, float* master, __half* value, const __half* grad, float* m, float* v,
                      std::int64_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                      std::int64_t step, float grad_scale);

// x [n] *= s (gradient clipping), rounded as the CPU's kernels::scale_inplace<float>.
// Asynchronous on ctx.stream.
void scale_inplace(const KernelContext& ctx, float* x, std::int64_t n, float s);

// Bytes of ctx.scratch that sum_of_squares and all_finite need (fixed, whatever n).
std::size_t reduction_scratch_bytes();

// Sum of x[i]^2 over x [n], accumulated in double: per-block partial sums over a fixed grid,
// then added in block order, so the result does not change from run to run (the CPU's 16
// partial sums round differently: equal within rounding). Synchronizes ctx.stream.
template <class T>
double sum_of_squares(const KernelContext& ctx, const T* x, std::int64_t n);

// True when no element of x [n] is inf or NaN (the fp16 loss scaler's overflow check).
// Synchronizes ctx.stream.
template <class T>
bool all_finite(const KernelContext& ctx, const T* x, std::int64_t n);

}  // namespace memtrain::kernels::gpu
