#pragma once
// A trainable tensor, its gradient, and whether AdamW decays it.
#include <cstdint>
#include <string>

#include "runtime/core/tensor.hpp"

namespace memtrain::models {

// How a parameter is split across the ranks of a tensor-parallel group (Megatron-LM).
// replicated: every rank holds the whole tensor (LayerNorms, row-parallel biases, position and
// type embeddings, the MLM transform). dim0: a contiguous range of dim-0 rows (column-parallel
// weights and biases, the vocabulary-parallel word table and decoder bias). dim1: a range of
// dim-1 columns (row-parallel weights), strided in the flat unsharded tensor.
enum class Sharding { replicated, dim0, dim1 };

// Where a shard sits in the unsharded tensor. For dim0 / dim1: the shard holds indices
// [offset, offset + shard extent) of that dimension out of `full_extent` (padded to a multiple
// of the group size for the vocabulary); indices >= `valid_extent` are padding (vocabulary
// rows Megatron-LM adds so every rank gets as many; they start at zero and stay there).
struct ShardSpec {
  Sharding sharding = Sharding::replicated;
  std::int64_t offset = 0;
  std::int64_t full_extent = 0;
  std::int64_t valid_extent = 0;
};

struct Parameter {
  std::string name;     // Hugging Face name, e.g. bert.encoder.layer.0.attention.self.query.weight
  core::Tensor value;   // compute dtype (ModelOptions::compute_dtype), tag parameter; this rank's
                        // shard under tensor parallelism (shard)
  core::Tensor grad;    // same shape, tag gradient; forward_backward accumulates into it.
                        // compute dtype, or f32 with ModelOptions::fp32_grad_accumulation
  bool weight_decay;    // false for biases and LayerNorm weights (as Hugging Face and Megatron)
  core::Tensor master;  // f32, tag master_weight; defined only when value is 16-bit: the
                        // optimizer updates it and writes value back (round to nearest even)
  ShardSpec shard;      // replicated unless the model is tensor-parallel

  bool sharded() const { return shard.sharding != Sharding::replicated; }
};

}  // namespace memtrain::models
