#pragma once
// Softmax cross-entropy over a vocabulary split across the ranks of a tensor-parallel group
// (Megatron-LM's vocab_parallel_cross_entropy, Shoeybi et al. 2019, sec. 3) as three passes
// over this rank's columns; the caller all-reduces between them, so no rank ever holds a whole
// row of logits. With one rank (first = 0, columns = vocab_size) and no all-reduce it is the
// plain softmax cross-entropy.
//
// Shapes: logits, dlogits [M, columns], this rank's columns of each row: global vocabulary ids
// [first, first + columns), of which those >= vocab_size are padding and take no part in the
// softmax (valid = clamp(vocab_size - first, 0, columns) columns are real); targets [M], global
// ids; every per-row array [M] except sums [2 M]. Never allocates, never communicates; threads
// (OpenMP) over rows when M * columns >= 65536.
#include <cstdint>

namespace memtrain::kernels {

// Pass 1. Checks every target is in [0, vocab_size): throws std::out_of_range naming the first
// bad row, before anything is written. Then per row m: local_max[m] = the maximum over this
// rank's valid columns (-inf when it has none), local_first[m] = the column of its first
// occurrence (-1 when none), and global_max[m] = local_max[m], the buffer the caller then
// all-reduces (max) into the row's maximum over all ranks.
void vocab_parallel_cross_entropy_local_max(float* local_max, std::int64_t* local_first, float* global_max,
                                            const float* logits, const std::int32_t* targets, int M, std::int64_t first,
                                            std::int64_t columns, std::int64_t vocab_size);

// Pass 2, global_max now the rows' maxima over all ranks. Per row m: sums[m] = the sum over
// this rank's valid columns of exp(z - global_max[m]), in double; sums[M + m] = the target's
// logit on the rank that owns it, 0 elsewhere; argmax[m] = -(first + local_first[m]) when this
// rank's maximum is the row's, else -inf, so that the maximum over ranks is minus the row's
// first global argmax (torch.argmax's tie rule). The caller then all-reduces sums (sum) and,
// when it counts correct rows, argmax (max).
void vocab_parallel_cross_entropy_sums(double* sums, double* argmax, const float* logits, const std::int32_t* targets,
                                       const float* local_max, const std::int64_t* local_first, const float* global_max,
                                       int M, std::int64_t first, std::int64_t columns, std::int64_t vocab_size);

// Pass 3, sums and argmax reduced over the ranks. Returns the SUM over rows of
// -log p(target) = (max - z_target) + log(sum) in double, added in row order (the same on every
// rank); *num_correct (if not null) gets the rows whose first global argmax is the target.
// dlogits (if not null; may alias logits) gets (softmax - onehot(target)) grad_scale on the
// valid columns and 0 on padding.
double vocab_parallel_cross_entropy_finish(float* dlogits, const float* logits, const std::int32_t* targets,
                                           const float* global_max, const double* sums, const double* argmax, int M,
                                           std::int64_t first, std::int64_t columns, std::int64_t vocab_size,
                                           float grad_scale, std::int64_t* num_correct);

}  // namespace memtrain::kernels
