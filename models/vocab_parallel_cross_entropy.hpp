#pragma once
// Softmax cross-entropy over a vocabulary split across a tensor-parallel group (Megatron-LM's
// vocab_parallel_cross_entropy, Shoeybi et al. 2019, sec. 3): no rank ever holds a whole row
// of logits.
#include <cstdint>

#include "models/tensor_parallel.hpp"

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
// Throws memtrain::RuntimeError naming the row for a target outside [0, vocab_size).
double vocab_parallel_cross_entropy(float* dlogits, const float* logits, const std::int32_t* targets, int M,
                                    const VocabShard& shard, float grad_scale, std::int64_t* num_correct,
                                    const TensorParallel& tp);

}  // namespace memtrain::models
