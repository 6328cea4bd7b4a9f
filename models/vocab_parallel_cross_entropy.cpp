#include "models/vocab_parallel_cross_entropy.hpp"

#include <algorithm>

#include "kernels/ops/vocab_parallel_cross_entropy.hpp"
#include "models/f32_access.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::models {

std::int64_t VocabShard::valid_columns() const { return std::clamp<std::int64_t>(vocab_size - first, 0, columns); }

// Note [The cross-entropy's scratch is a tensor]
// The passes keep five numbers a row between the all-reduces (the local and the global
// maximum, the first maximum's column, the exp sum and target logit, the argmax key): 40 bytes
// a row, about 24.6 KB for the ~614 masked tokens of a BERT-Large micro-batch (8 x 512, 15%).
// They were std::vectors outside the allocator, so the plan could not see them; as a temporary
// tensor they count in the allocator's figures, and the dry run allocates them exactly as the
// compute run does. BERT-Large's plan is unchanged by them (tp = 2 on a100-40gb, 2026-12-06):
// the head's loss is not where the step peaks, and a block that small is served from cached
// space. The bytes are a tensor of i32 because the dtypes have no 8-byte type; the op carves
// them (kernels::ops::vocab_parallel_cross_entropy_scratch).
core::Tensor vocab_parallel_cross_entropy_scratch(core::Context& ctx, int M) {
  const auto words = static_cast<std::int64_t>(kernels::ops::vocab_parallel_cross_entropy_scratch_bytes(M) / 4);
  return core::Tensor::empty(ctx, {words}, core::DType::i32, core::tags().temporary);
}

double vocab_parallel_cross_entropy(const kernels::OpContext& kc, const core::Tensor& scratch, float* dlogits,
                                    const float* logits, const std::int32_t* targets, int M, const VocabShard& shard,
                                    float grad_scale, std::int64_t* num_correct, const TensorParallel& tp) {
  namespace ops = kernels::ops;
  const auto s = ops::vocab_parallel_cross_entropy_scratch(raw_bytes(scratch), M);
  ops::vocab_parallel_cross_entropy_local_max(kc, s, logits, targets, M, shard.first, shard.columns, shard.vocab_size);
  if (tp.enabled()) tp.group->allreduce_max(s.global_max, M);
  ops::vocab_parallel_cross_entropy_sums(kc, s, logits, targets, M, shard.first, shard.columns, shard.vocab_size);
  if (tp.enabled()) {
    tp.group->allreduce_sum(s.sums, 2 * std::int64_t{M});
    if (num_correct != nullptr) tp.group->allreduce_max(s.argmax, M);
  }
  return ops::vocab_parallel_cross_entropy_finish(kc, s, dlogits, logits, targets, M, shard.first, shard.columns,
                                                  shard.vocab_size, grad_scale, num_correct);
}

}  // namespace memtrain::models
