#include "kernels/ops/linear.hpp"

#include "kernels/cpu/linear.hpp"
#include "kernels/cpu/linear_bf16.hpp"
#include "kernels/cpu/linear_half_weight.hpp"
#include "kernels/cpu/matmul_bf16.hpp"
#include "kernels/ops/dispatch.hpp"

#if MEMTRAIN_HAVE_CUDA
#include <cuda_bf16.h>

#include "kernels/cuda/linear.hpp"
#include "kernels/cuda/linear_bf16.hpp"
#endif

namespace memtrain::kernels::ops {

void linear_forward(const OpContext& kc, float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC) {
  if (detail::on_cpu(kc, "linear_forward")) return kernels::linear_forward(out, inp, weight, bias, N, C, OC);
#if MEMTRAIN_HAVE_CUDA
  gpu::linear_forward(detail::cuda(kc), out, inp, weight, bias, N, C, OC);
#endif
}

void linear_backward(const OpContext& kc, float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int N, int C, int OC) {
  if (detail::on_cpu(kc, "linear_backward")) {
    return kernels::linear_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
  }
#if MEMTRAIN_HAVE_CUDA
  gpu::linear_backward(detail::cuda(kc), dinp, dweight, dbias, dout, inp, weight, N, C, OC);
#endif
}

#if MEMTRAIN_HAVE_CUDA
namespace {
const __nv_bfloat16* as_bf16(const std::uint16_t* p) { return reinterpret_cast<const __nv_bfloat16*>(p); }
}  // namespace
#endif

void linear_forward_bf16(const OpContext& kc, float* out, const std::uint16_t* inp, const std::uint16_t* weight,
                         const float* bias, int N, int C, int OC) {
  if (detail::on_cpu(kc, "linear_forward_bf16")) {
    return kernels::linear_forward_bf16(out, inp, weight, bias, N, C, OC);
  }
#if MEMTRAIN_HAVE_CUDA
  gpu::linear_forward_bf16(detail::cuda(kc), out, as_bf16(inp), as_bf16(weight), bias, N, C, OC);
#endif
}

void linear_backward_bf16(const OpContext& kc, float* dinp, void* dweight, bool dweight_bf16, bool dweight_accumulate,
                          float* dbias, const std::uint16_t* dout, const std::uint16_t* inp,
                          const std::uint16_t* weight, int N, int C, int OC) {
  if (detail::on_cpu(kc, "linear_backward_bf16")) {
    return kernels::linear_backward_bf16(dinp, dweight, dweight_bf16, dweight_accumulate, dbias, dout, inp, weight, N,
                                         C, OC);
  }
#if MEMTRAIN_HAVE_CUDA
  gpu::linear_backward_bf16(detail::cuda(kc), dinp, dweight, dweight_bf16, dweight_accumulate, dbias, as_bf16(dout),
                            as_bf16(inp), as_bf16(weight), N, C, OC);
#endif
}

std::size_t linear_bf16_workspace_bytes(Device device) {
  if (detail::on_cpu(device, "linear_bf16_workspace_bytes")) return 0;
#if MEMTRAIN_HAVE_CUDA
  return gpu::kLinearBf16ScratchBytes;
#else
  return 0;  // unreachable: on_cpu throws for a GPU without CUDA
#endif
}

bool bf16_gemm_native(Device device) { return device != Device::cpu || kernels::bf16_gemm_native(); }

std::size_t linear_half_weight_scratch_elements(const OpContext& kc, int OC, int C) {
  return kc.device == Device::cpu ? kernels::linear_half_weight_scratch_elements(OC, C) : 0;
}

void linear_forward_half_weight(const OpContext& kc, float* out, const float* inp, const std::uint16_t* weight,
                                const float* bias, int N, int C, int OC, HalfFormat format, float* scratch) {
  detail::require_cpu(kc, "linear_forward_half_weight");
  kernels::linear_forward_half_weight(out, inp, weight, bias, N, C, OC, format, scratch);
}

void linear_backward_half_weight(const OpContext& kc, float* dinp, std::uint16_t* dweight, bool dweight_accumulate,
                                 float* dbias, const float* dout, const float* inp, const std::uint16_t* weight, int N,
                                 int C, int OC, HalfFormat format, float* scratch) {
  detail::require_cpu(kc, "linear_backward_half_weight");
  kernels::linear_backward_half_weight(dinp, dweight, dweight_accumulate, dbias, dout, inp, weight, N, C, OC, format,
                                       scratch);
}

}  // namespace memtrain::kernels::ops
