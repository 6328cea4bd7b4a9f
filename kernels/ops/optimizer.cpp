#include "kernels/ops/optimizer.hpp"

#include "kernels/cpu/adamw.hpp"
#include "kernels/ops/dispatch.hpp"

#if MEMTRAIN_HAVE_CUDA
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/adamw.hpp"
#endif

namespace memtrain::kernels::ops {

#if MEMTRAIN_HAVE_CUDA
namespace {
// 16-bit storage is bit patterns on both sides; the CUDA kernels take the CUDA types of the same
// size and layout.
const __nv_bfloat16* as_bf16(const std::uint16_t* p) { return reinterpret_cast<const __nv_bfloat16*>(p); }
const __half* as_f16(const std::uint16_t* p) { return reinterpret_cast<const __half*>(p); }
}  // namespace
#endif

void adamw_update(const OpContext& kc, float* param, const float* grad, float* m, float* v, std::int64_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, std::int64_t step, float grad_scale) {
  if (detail::on_cpu(kc, "adamw_update")) {
    return kernels::adamw_update(param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, step, grad_scale);
  }
#if MEMTRAIN_HAVE_CUDA
  gpu::adamw_update(detail::cuda(kc), param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, step, grad_scale);
#endif
}

void adamw_update_half(const OpContext& kc, float* master, std::uint16_t* value, const std::uint16_t* grad, float* m,
                       float* v, std::int64_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                       std::int64_t step, float grad_scale, HalfFormat f) {
  if (detail::on_cpu(kc, "adamw_update_half")) {
    return kernels::adamw_update_half(master, value, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, step,
                                      grad_scale, f);
  }
#if MEMTRAIN_HAVE_CUDA
  if (f == HalfFormat::bf16) {
    gpu::adamw_update_bf16(detail::cuda(kc), master, reinterpret_cast<__nv_bfloat16*>(value), as_bf16(grad), m, v, n,
                           lr, beta1, beta2, eps, weight_decay, step, grad_scale);
  } else {
    gpu::adamw_update_f16(detail::cuda(kc), master, reinterpret_cast<__half*>(value), as_f16(grad), m, v, n, lr, beta1,
                          beta2, eps, weight_decay, step, grad_scale);
  }
#endif
}

void scale_inplace(const OpContext& kc, float* x, std::int64_t n, float s) {
  if (detail::on_cpu(kc, "scale_inplace")) return kernels::scale_inplace(x, n, s);
#if MEMTRAIN_HAVE_CUDA
  gpu::scale_inplace(detail::cuda(kc), x, n, s);
#endif
}

double sum_of_squares(const OpContext& kc, const float* x, std::int64_t n) {
  if (detail::on_cpu(kc, "sum_of_squares")) return kernels::sum_of_squares(x, n);
#if MEMTRAIN_HAVE_CUDA
  return gpu::sum_of_squares(detail::cuda(kc), x, n);
#else
  return 0.0;  // not reached: on_cpu throws in a build without CUDA
#endif
}

double sum_of_squares_half(const OpContext& kc, const std::uint16_t* x, std::int64_t n, HalfFormat f) {
  if (detail::on_cpu(kc, "sum_of_squares_half")) return kernels::sum_of_squares_half(x, n, f);
#if MEMTRAIN_HAVE_CUDA
  return f == HalfFormat::bf16 ? gpu::sum_of_squares(detail::cuda(kc), as_bf16(x), n)
                               : gpu::sum_of_squares(detail::cuda(kc), as_f16(x), n);
#else
  return 0.0;
#endif
}

bool all_finite(const OpContext& kc, const float* x, std::int64_t n) {
  if (detail::on_cpu(kc, "all_finite")) return kernels::all_finite(x, n);
#if MEMTRAIN_HAVE_CUDA
  return gpu::all_finite(detail::cuda(kc), x, n);
#else
  return false;
#endif
}

bool all_finite_half(const OpContext& kc, const std::uint16_t* x, std::int64_t n, HalfFormat f) {
  if (detail::on_cpu(kc, "all_finite_half")) return kernels::all_finite(x, n, f);
#if MEMTRAIN_HAVE_CUDA
  return f == HalfFormat::bf16 ? gpu::all_finite(detail::cuda(kc), as_bf16(x), n)
                               : gpu::all_finite(detail::cuda(kc), as_f16(x), n);
#else
  return false;
#endif
}

std::size_t reduction_workspace_bytes(Device device) {
  if (detail::on_cpu(device, "reduction_workspace_bytes")) return 0;
#if MEMTRAIN_HAVE_CUDA
  return gpu::reduction_scratch_bytes();
#else
  return 0;  // unreachable: on_cpu throws for a GPU without CUDA
#endif
}

}  // namespace memtrain::kernels::ops
