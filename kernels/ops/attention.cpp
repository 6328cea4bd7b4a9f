#include "kernels/ops/attention.hpp"

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/flash_attention.hpp"
#include "kernels/ops/dispatch.hpp"

#if MEMTRAIN_HAVE_CUDA
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/flash_attention.hpp"
#endif

namespace memtrain::kernels::ops {

void attention_forward(const OpContext& kc, float* out, float* probs, const float* q, const float* k, const float* v,
                       const float* key_mask, int B, int T, int C, int NH, float dropout_p, const RngKey& key,
                       std::uint64_t first_sample, int first_head) {
  if (detail::on_cpu(kc, "attention_forward")) {
    return kernels::attention_forward(out, probs, q, k, v, key_mask, B, T, C, NH, dropout_p, key, first_sample,
                                      first_head);
  }
#if MEMTRAIN_HAVE_CUDA
  gpu::attention_forward(detail::cuda(kc), out, probs, q, k, v, key_mask, B, T, C, NH, dropout_p, key, first_sample,
                         first_head);
#endif
}

void attention_probs(const OpContext& kc, float* probs, const float* q, const float* k, const float* key_mask, int B,
                     int T, int C, int NH) {
  detail::require_cpu(kc, "attention_probs");
  kernels::attention_probs(probs, q, k, key_mask, B, T, C, NH);
}

void attention_backward(const OpContext& kc, float* dq, float* dk, float* dv, float* scratch, const float* dout,
                        const float* probs, const float* q, const float* k, const float* v, int B, int T, int C, int NH,
                        float dropout_p, const RngKey& key, std::uint64_t first_sample, int first_head) {
  if (detail::on_cpu(kc, "attention_backward")) {
    return kernels::attention_backward(dq, dk, dv, scratch, dout, probs, q, k, v, B, T, C, NH, dropout_p, key,
                                       first_sample, first_head);
  }
#if MEMTRAIN_HAVE_CUDA
  gpu::attention_backward(detail::cuda(kc), dq, dk, dv, scratch, dout, probs, q, k, v, B, T, C, NH, dropout_p, key,
                          first_sample, first_head);
#endif
}

std::size_t attention_workspace_bytes(Device device, [[maybe_unused]] int B, [[maybe_unused]] int T,
                                      [[maybe_unused]] int NH, [[maybe_unused]] float dropout_p,
                                      [[maybe_unused]] std::size_t element_bytes) {
  if (detail::on_cpu(device, "attention_workspace_bytes")) return 0;
#if MEMTRAIN_HAVE_CUDA
  return gpu::attention_scratch_bytes(B, T, NH, dropout_p, element_bytes);
#else
  return 0;  // unreachable: on_cpu throws for a GPU without CUDA
#endif
}

std::size_t flash_attention_workspace_elements(const OpContext& kc, int T, int C, int NH) {
  return detail::on_cpu(kc, "flash_attention_workspace_elements")
             ? kernels::flash_attention_workspace_elements(T, C, NH)
             : 0;
}

void flash_attention_forward(const OpContext& kc, float* out, float* lse, const float* q, const float* k,
                             const float* v, const float* key_mask, int B, int T, int C, int NH, float dropout_p,
                             const RngKey& key, std::uint64_t first_sample, float* workspace, int first_head) {
  if (detail::on_cpu(kc, "flash_attention_forward")) {
    return kernels::flash_attention_forward(out, lse, q, k, v, key_mask, B, T, C, NH, dropout_p, key, first_sample,
                                            workspace, first_head);
  }
#if MEMTRAIN_HAVE_CUDA
  gpu::flash_attention_forward(detail::cuda(kc), out, lse, q, k, v, key_mask, B, T, C, NH, dropout_p, key, first_sample,
                               first_head);
#endif
}

void flash_attention_backward(const OpContext& kc, float* dq, float* dk, float* dv, const float* dout, const float* out,
                              const float* lse, const float* q, const float* k, const float* v, const float* key_mask,
                              int B, int T, int C, int NH, float dropout_p, const RngKey& key,
                              std::uint64_t first_sample, float* workspace, int first_head) {
  if (detail::on_cpu(kc, "flash_attention_backward")) {
    return kernels::flash_attention_backward(dq, dk, dv, dout, out, lse, q, k, v, key_mask, B, T, C, NH, dropout_p, key,
                                             first_sample, workspace, first_head);
  }
#if MEMTRAIN_HAVE_CUDA
  gpu::flash_attention_backward(detail::cuda(kc), dq, dk, dv, dout, out, lse, q, k, v, key_mask, B, T, C, NH, dropout_p,
                                key, first_sample, first_head);
#endif
}

}  // namespace memtrain::kernels::ops
