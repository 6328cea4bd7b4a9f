#include "kernels/ops/dropout.hpp"

#include "kernels/cpu/dropout.hpp"
#include "kernels/ops/dispatch.hpp"

#if MEMTRAIN_HAVE_CUDA
#include "kernels/cuda/dropout.hpp"
#endif

namespace memtrain::kernels::ops {

void dropout_forward(const OpContext& kc, float* out, const float* inp, int rows, long per_sample, float p,
                     const RngKey& key, std::uint64_t first_sample, std::uint64_t first_element) {
  if (detail::on_cpu(kc, "dropout_forward")) {
    return kernels::dropout_forward(out, inp, rows, per_sample, p, key, first_sample, first_element);
  }
#if MEMTRAIN_HAVE_CUDA
  gpu::dropout_forward(detail::cuda(kc), out, inp, rows, per_sample, p, key, first_sample, first_element);
#endif
}

void dropout_backward(const OpContext& kc, float* dinp, const float* dout, int rows, long per_sample, float p,
                      const RngKey& key, std::uint64_t first_sample, std::uint64_t first_element) {
  if (detail::on_cpu(kc, "dropout_backward")) {
    return kernels::dropout_backward(dinp, dout, rows, per_sample, p, key, first_sample, first_element);
  }
#if MEMTRAIN_HAVE_CUDA
  gpu::dropout_backward(detail::cuda(kc), dinp, dout, rows, per_sample, p, key, first_sample, first_element);
#endif
}

void dropout_residual_forward(const OpContext& kc, float* out, const float* inp, const float* residual, int rows,
                              long per_sample, float p, const RngKey& key, std::uint64_t first_sample,
                              std::uint64_t first_element) {
  if (detail::on_cpu(kc, "dropout_residual_forward")) {
    return kernels::dropout_residual_forward(out, inp, residual, rows, per_sample, p, key, first_sample, first_element);
  }
#if MEMTRAIN_HAVE_CUDA
  gpu::dropout_residual_forward(detail::cuda(kc), out, inp, residual, rows, per_sample, p, key, first_sample,
                                first_element);
#endif
}

}  // namespace memtrain::kernels::ops
