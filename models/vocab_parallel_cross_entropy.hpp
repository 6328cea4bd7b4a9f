#pragma once
// Softmax cross-entropy over a vocabulary split across a tensor-parallel group (Megatron-LM's
// vocab_parallel_cross_entropy, Shoeybi et al. 2019, sec. 3): no rank ever holds a whole row
// of logits. The math is the op API's (kernels/ops/vocab_parallel_cross_entropy); this layer
// runs its passes with the group's all-reduces between them.
#include <cstdint>

#include "kernels/op_context.hpp"
#include "models/tensor_parallel.hpp"
#include "runtime/core/context.hpp"
#include "runtime/core/tensor.hpp"

namespace memtrain::models {

// This rank's columns of the logits: global vocabulary ids [first, first + columns); those
// >= vocab_size are padding and take no part in the softmax.
struct VocabShard {
  std::int64_t first = 0;
  std::int64_t columns = 0;
  std::int64_t vocab_size = 0;
  // Columns of this shard that are real tokens.
  std::int64_t valid_columns() const;
};

// The per-row scratch vocab_parallel_cross_entropy takes for M rows (40 M bytes: Note [The
// cross-entropy's scratch is a tensor]), a temporary from ctx's allocator on ctx's stream.
// Allocated in a dry run too, so the dry run's trace is the compute run's. Throws
// memtrain::OutOfMemory (from the allocator) when the device is full.
core::Tensor vocab_parallel_cross_entropy_scratch(core::Context& ctx, int M);

// For logits [M, shard.columns] (this rank's columns of each row) and targets [M] in
// [0, vocab_size): per row, the maximum over the valid columns is all-reduced (max), then the
// sum of exp(z - max) and the target's logit (taken on the rank that owns it, 0 elsewhere)
// are all-reduced (sum), so -log p(target) = max - z_target + log(sum) on every rank.
// Accuracy: the first maximum across the whole row (torch.argmax's tie rule), found from each
// rank's first local maximum with one more all-reduce (max).
// When dlogits is not null it gets (softmax - onehot(target)) x grad_scale on the valid
// columns and 0 on padding (may alias logits). Returns the SUM of the row losses (double),
// the same on every rank; *num_correct (if not null) gets the rows whose argmax is the target.
// Three collectives over tp.group; with one rank it is the plain softmax cross-entropy.
// scratch is vocab_parallel_cross_entropy_scratch(ctx, M)'s tensor; kc runs the passes (the
// CPU only so far: std::runtime_error on a GPU). Throws std::out_of_range naming the row for a
// target outside [0, vocab_size), before anything is written or communicated.
double vocab_parallel_cross_entropy(const kernels::OpContext& kc, const core::Tensor& scratch, float* dlogits,
                                    const float* logits, const std::int32_t* targets, int M, const VocabShard& shard,
                                    float grad_scale, std::int64_t* num_correct, const TensorParallel& tp);

}  // namespace memtrain::models
