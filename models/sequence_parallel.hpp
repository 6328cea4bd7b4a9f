#pragma once
// Moving activations between the sequence-parallel and tensor-parallel layouts (Korthikanti et
// al. 2022, "Reducing Activation Recomputation in Large Transformer Models", sec. 4.2.2).
#include <cstdint>

#include "models/pass_state.hpp"
#include "models/tensor_parallel.hpp"

namespace memtrain::models {

// Note [Sequence-parallel regions]
// Under tensor parallelism alone, LayerNorms, dropouts and residual adds run on the whole
// [B, T, C] on every rank of the group, and each rank stores their inputs whole: the 10 sbh of
// Korthikanti's sbh(10 + 24/t + 5as/(ht)). Sequence parallelism splits these regions along the
// sequence instead: rank r keeps tokens [r T/t, (r + 1) T/t) of every sample ([B, T/t, C],
// "the shard"). The all-reduce that leaves a row-parallel region (g) becomes a reduce-scatter
// onto the shard, and the identity that enters a column-parallel region (f) an all-gather of
// the shard; their backward passes swap the two. The all-gather's output is not kept: the
// backward pass gathers the shard again for the weight gradients (as Megatron-LM does), so
// every stored activation is divided by t: sbh(34/t + 5as/(ht)).
// A LayerNorm's weight and bias then see only this rank's tokens: their gradients are partial
// and are summed over the group once per step (BertForMaskedLM::reduce_sequence_parallel_
// gradients). Dropout masks are keyed by the global token index (t x C + c), so a shard draws
// the masks of the unsharded run.
// The shard's layout is [B, T/t, C] (as the rest of memtrain, batch-major), so the group's
// collectives, which work on contiguous rank blocks, go through a staging copy [t, B, T/t, C].

// The first token of this rank's shard, and the shard's length (T / tp.size()).
inline int sequence_shard_first(const TensorParallel& tp, int T) { return tp.rank() * (T / tp.size()); }
inline int sequence_shard_length(const TensorParallel& tp, int T) { return T / tp.size(); }

// full [B, T, C] = every rank's shard [B, T/tp, C] in token order (all-gather over the group).
// No-op in a dry run. Scratch: a workspace slot of B x T x C floats.
void gather_sequence(const PassState& s, const TensorParallel& tp, const float* shard, float* full, int C);

// shard [B, T/tp, C] = the sum over the group of each rank's full [B, T, C] at this rank's
// tokens (reduce-scatter). No-op in a dry run. Scratch as gather_sequence.
void reduce_scatter_sequence(const PassState& s, const TensorParallel& tp, const float* full, float* shard, int C);

}  // namespace memtrain::models
