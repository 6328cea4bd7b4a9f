#include "kernels/ops/layernorm.hpp"

#include "kernels/cpu/layernorm.hpp"
#include "kernels/ops/dispatch.hpp"

#if MEMTRAIN_HAVE_CUDA
#include "kernels/cuda/layernorm.hpp"
#endif

namespace memtrain::kernels::ops {

void layernorm_forward(const OpContext& kc, float* out, float* mean, float* rstd, const float* x, const float* gamma,
                       const float* beta, int N, int C, float eps) {
  if (detail::on_cpu(kc, "layernorm_forward")) {
    return kernels::layernorm_forward(out, mean, rstd, x, gamma, beta, N, C, eps);
  }
#if MEMTRAIN_HAVE_CUDA
  gpu::layernorm_forward(detail::cuda(kc), out, mean, rstd, x, gamma, beta, N, C, eps);
#endif
}

void layernorm_backward(const OpContext& kc, float* dx, float* dgamma, float* dbeta, const float* dout, const float* x,
                        const float* gamma, const float* mean, const float* rstd, int N, int C) {
  if (detail::on_cpu(kc, "layernorm_backward")) {
    return kernels::layernorm_backward(dx, dgamma, dbeta, dout, x, gamma, mean, rstd, N, C);
  }
#if MEMTRAIN_HAVE_CUDA
  gpu::layernorm_backward(detail::cuda(kc), dx, dgamma, dbeta, dout, x, gamma, mean, rstd, N, C);
#endif
}

}  // namespace memtrain::kernels::ops
