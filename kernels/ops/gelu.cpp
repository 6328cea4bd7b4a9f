#include "kernels/ops/gelu.hpp"

#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/gelu_half.hpp"
#include "kernels/ops/dispatch.hpp"

#if MEMTRAIN_HAVE_CUDA
#include "kernels/cuda/gelu.hpp"
#endif

namespace memtrain::kernels::ops {

void bias_gelu_forward(const OpContext& kc, float* out, const float* inp, const float* bias, int N, int C) {
  if (detail::on_cpu(kc, "bias_gelu_forward")) return kernels::bias_gelu_forward(out, inp, bias, N, C);
#if MEMTRAIN_HAVE_CUDA
  gpu::bias_gelu_forward(detail::cuda(kc), out, inp, bias, N, C);
#endif
}

void bias_gelu_backward(const OpContext& kc, float* dinp, float* dbias, const float* dout, const float* inp,
                        const float* bias, int N, int C) {
  if (detail::on_cpu(kc, "bias_gelu_backward")) {
    return kernels::bias_gelu_backward(dinp, dbias, dout, inp, bias, N, C);
  }
#if MEMTRAIN_HAVE_CUDA
  gpu::bias_gelu_backward(detail::cuda(kc), dinp, dbias, dout, inp, bias, N, C);
#endif
}

void bias_gelu_forward_half(const OpContext& kc, std::uint16_t* out, const std::uint16_t* inp, const float* bias, int N,
                            int C, HalfFormat format) {
  detail::require_cpu(kc, "bias_gelu_forward_half");
  kernels::bias_gelu_forward_half(out, inp, bias, N, C, format);
}

void bias_gelu_backward_half(const OpContext& kc, std::uint16_t* dinp, float* dbias, const std::uint16_t* dout,
                             const std::uint16_t* inp, const float* bias, int N, int C, HalfFormat format) {
  detail::require_cpu(kc, "bias_gelu_backward_half");
  kernels::bias_gelu_backward_half(dinp, dbias, dout, inp, bias, N, C, format);
}

}  // namespace memtrain::kernels::ops
