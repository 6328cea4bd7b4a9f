#pragma once
// The two ends of a split block: leaving a row-parallel projection (Megatron's g; the
// OutputSublayer of BertAttention and BertMlp) and entering a column-parallel one backward (f's
// backward), in the three layouts (no tensor parallelism, tensor parallelism, and with sequence
// parallelism).
#include "models/linear.hpp"
#include "models/pass_state.hpp"
#include "models/tensor_parallel.hpp"

namespace memtrain::models {

// out [B, Tl, C] = the row-parallel `linear` of inp [B, T, I/tp], summed over the group, plus
// the bias once: without tensor parallelism the plain Linear (bias in the GEMM, Tl = T); with
// it, partial sums all-reduced (Tl = T) or, with sequence parallelism, reduce-scattered onto
// this rank's tokens (Tl = T/tp) through a temporary [B, T, C] (tag temporary). `out` is a
// float view (the f32 staging of 16-bit activations). Note [Megatron's f and g].
void row_parallel_forward(PassState& s, const TensorParallel& tp, const Linear& linear, const GemmInput& inp,
                          float* out);

// The row-parallel backward from dout [B, Tl, C] (this rank's tokens under sequence
// parallelism, all-gathered first into a temporary [B, T, C]; g's backward): dinp
// [B, T, I/tp] += dout W, dW += dout^T inp, db += column sums of the whole dout (the same on
// every rank).
void row_parallel_backward(PassState& s, const TensorParallel& tp, Linear& linear, float* dinp, const float* dout,
                           const GemmInput& inp);

// shard [B, T/tp, C] += this rank's tokens of the sum over the group of full [B, T, C]: f's
// backward under sequence parallelism. No-op in a dry run.
void add_reduce_scattered(const PassState& s, const TensorParallel& tp, const float* full, float* shard, int C);

}  // namespace memtrain::models
