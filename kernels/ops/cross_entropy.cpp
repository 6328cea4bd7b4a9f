#include "kernels/ops/cross_entropy.hpp"

#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/ops/dispatch.hpp"

#if MEMTRAIN_HAVE_CUDA
#include "kernels/cuda/cross_entropy.hpp"
#endif

namespace memtrain::kernels::ops {

double softmax_cross_entropy_forward_backward(const OpContext& kc, float* dlogits, const float* logits,
                                              const std::int32_t* targets, int M, int V, float grad_scale,
                                              std::int64_t* num_correct) {
  if (detail::on_cpu(kc, "softmax_cross_entropy_forward_backward")) {
    return kernels::softmax_cross_entropy_forward_backward(dlogits, logits, targets, M, V, grad_scale, num_correct);
  }
#if MEMTRAIN_HAVE_CUDA
  return gpu::softmax_cross_entropy_forward_backward(detail::cuda(kc), dlogits, logits, targets, M, V, grad_scale,
                                                     num_correct);
#else
  return 0.0;  // unreachable: on_cpu throws for a GPU without CUDA
#endif
}

std::size_t softmax_cross_entropy_workspace_bytes(Device device, [[maybe_unused]] int M) {
  if (detail::on_cpu(device, "softmax_cross_entropy_workspace_bytes")) return 0;
#if MEMTRAIN_HAVE_CUDA
  return gpu::cross_entropy_scratch_bytes(M);
#else
  return 0;    // unreachable: on_cpu throws for a GPU without CUDA
#endif
}

double softmax_cross_entropy_forward(const OpContext& kc, const float* logits, const std::int32_t* targets, int M,
                                     int V, std::int64_t* num_correct) {
  if (detail::on_cpu(kc, "softmax_cross_entropy_forward")) {
    return kernels::softmax_cross_entropy_forward(logits, targets, M, V, num_correct);
  }
#if MEMTRAIN_HAVE_CUDA
  // The GPU kernel skips the gradient when dlogits is null.
  return gpu::softmax_cross_entropy_forward_backward(detail::cuda(kc), static_cast<float*>(nullptr), logits, targets, M,
                                                     V, 1.0f, num_correct);
#else
  return 0.0;  // unreachable: on_cpu throws for a GPU without CUDA
#endif
}

}  // namespace memtrain::kernels::ops
