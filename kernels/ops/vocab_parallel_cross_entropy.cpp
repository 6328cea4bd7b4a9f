#include "kernels/ops/vocab_parallel_cross_entropy.hpp"

#include "kernels/cpu/vocab_parallel_cross_entropy.hpp"
#include "kernels/ops/dispatch.hpp"

namespace memtrain::kernels::ops {

std::size_t vocab_parallel_cross_entropy_scratch_bytes(int M) {
  // sums [2 M] and argmax [M] doubles, local_first [M] int64, local_max and global_max [M] floats.
  return static_cast<std::size_t>(M) * (3 * sizeof(double) + sizeof(std::int64_t) + 2 * sizeof(float));
}

VocabParallelCrossEntropyScratch vocab_parallel_cross_entropy_scratch(void* buffer, int M) {
  auto* bytes = static_cast<unsigned char*>(buffer);
  const auto n = static_cast<std::size_t>(M);
  VocabParallelCrossEntropyScratch s;
  s.sums = reinterpret_cast<double*>(bytes);
  s.argmax = s.sums + 2 * n;
  s.local_first = reinterpret_cast<std::int64_t*>(s.argmax + n);
  s.local_max = reinterpret_cast<float*>(s.local_first + n);
  s.global_max = s.local_max + n;
  return s;
}

void vocab_parallel_cross_entropy_local_max(const OpContext& kc, const VocabParallelCrossEntropyScratch& scratch,
                                            const float* logits, const std::int32_t* targets, int M, std::int64_t first,
                                            std::int64_t columns, std::int64_t vocab_size) {
  detail::require_cpu(kc, "vocab_parallel_cross_entropy_local_max");
  kernels::vocab_parallel_cross_entropy_local_max(scratch.local_max, scratch.local_first, scratch.global_max, logits,
                                                  targets, M, first, columns, vocab_size);
}

void vocab_parallel_cross_entropy_sums(const OpContext& kc, const VocabParallelCrossEntropyScratch& scratch,
                                       const float* logits, const std::int32_t* targets, int M, std::int64_t first,
                                       std::int64_t columns, std::int64_t vocab_size) {
  detail::require_cpu(kc, "vocab_parallel_cross_entropy_sums");
  kernels::vocab_parallel_cross_entropy_sums(scratch.sums, scratch.argmax, logits, targets, scratch.local_max,
                                             scratch.local_first, scratch.global_max, M, first, columns, vocab_size);
}

double vocab_parallel_cross_entropy_finish(const OpContext& kc, const VocabParallelCrossEntropyScratch& scratch,
                                           float* dlogits, const float* logits, const std::int32_t* targets, int M,
                                           std::int64_t first, std::int64_t columns, std::int64_t vocab_size,
                                           float grad_scale, std::int64_t* num_correct) {
  detail::require_cpu(kc, "vocab_parallel_cross_entropy_finish");
  return kernels::vocab_parallel_cross_entropy_finish(dlogits, logits, targets, scratch.global_max, scratch.sums,
                                                      scratch.argmax, M, first, columns, vocab_size, grad_scale,
                                                      num_correct);
}

}  // namespace memtrain::kernels::ops
