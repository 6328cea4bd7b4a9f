#pragma once
// Softmax cross-entropy over a vocabulary split across a tensor-parallel group, through the op
// API: the three passes of kernels/cpu/vocab_parallel_cross_entropy, with its contract (shapes,
// padding columns, the order of the sums). The caller all-reduces between the passes and
// provides their per-row scratch; no CUDA twin yet, so on a GPU each pass throws.
#include <cstddef>
#include <cstdint>

#include "kernels/op_context.hpp"

namespace memtrain::kernels::ops {

// The per-row scratch of the three passes for M rows, carved from one buffer of
// vocab_parallel_cross_entropy_scratch_bytes(M) bytes (8-byte aligned): the doubles first, then
// the 8-byte integers, then the floats.
struct VocabParallelCrossEntropyScratch {
  double* sums = nullptr;               // [2 M]: exp sums, then the target logits
  double* argmax = nullptr;             // [M]: minus the first global argmax, once reduced
  std::int64_t* local_first = nullptr;  // [M]: this rank's first maximum's column, or -1
  float* local_max = nullptr;           // [M]: this rank's maximum
  float* global_max = nullptr;          // [M]: the row's maximum, once reduced
};

// Bytes of scratch for M rows: 40 M (M >= 0).
std::size_t vocab_parallel_cross_entropy_scratch_bytes(int M);

// The arrays of the scratch at `buffer` (vocab_parallel_cross_entropy_scratch_bytes(M) bytes,
// 8-byte aligned, on the device of the ops that will use it). Does not touch the memory.
VocabParallelCrossEntropyScratch vocab_parallel_cross_entropy_scratch(void* buffer, int M);

// Pass 1: checks the targets [M] (std::out_of_range naming the row), then scratch.local_max,
// .local_first and .global_max from this rank's columns of logits [M, columns] (global ids
// [first, first + columns), those >= vocab_size padding). The caller then all-reduces
// scratch.global_max [M] with max. Throws std::runtime_error on a GPU (CPU only so far).
void vocab_parallel_cross_entropy_local_max(const OpContext& kc, const VocabParallelCrossEntropyScratch& scratch,
                                            const float* logits, const std::int32_t* targets, int M, std::int64_t first,
                                            std::int64_t columns, std::int64_t vocab_size);

// Pass 2: scratch.sums [2 M] (exp sums, target logits) and scratch.argmax [M]. The caller then
// all-reduces sums with sum and, when it counts correct rows, argmax with max. Throws
// std::runtime_error on a GPU.
void vocab_parallel_cross_entropy_sums(const OpContext& kc, const VocabParallelCrossEntropyScratch& scratch,
                                       const float* logits, const std::int32_t* targets, int M, std::int64_t first,
                                       std::int64_t columns, std::int64_t vocab_size);

// Pass 3: returns the SUM of the row losses (double, the same on every rank); *num_correct (if
// not null) gets the rows whose first global argmax is the target; dlogits [M, columns] (if
// not null; may alias logits) gets (softmax - onehot(target)) grad_scale, 0 on padding. Throws
// std::runtime_error on a GPU.
double vocab_parallel_cross_entropy_finish(const OpContext& kc, const VocabParallelCrossEntropyScratch& scratch,
                                           float* dlogits, const float* logits, const std::int32_t* targets, int M,
                                           std::int64_t first, std::int64_t columns, std::int64_t vocab_size,
                                           float grad_scale, std::int64_t* num_correct);

}  // namespace memtrain::kernels::ops
