#pragma once
// A checkpoint's tensor-parallel shards put back together, and a shard of another layout cut out
// of the whole: how export-hf merges a model and how a resume changes the tensor-parallel size
// (docs/checkpoints.md, "Resume").
#include <map>
#include <string>

#include "models/parameter.hpp"
#include "runtime/core/safetensors.hpp"
#include "runtime/core/tensor.hpp"

namespace memtrain::train {

// Note [Resharding onto another tensor-parallel size]
// Every sharded parameter records where its shard sits in the whole (memtrain_shards of
// model-tpXX.safetensors: dim0 rows or dim1 columns at `offset` of `full_extent`, valid below
// `valid_extent`), and its AdamW moments and fp32 master are split exactly as it is. So a
// checkpoint of tp ranks is first merged, tensor by tensor, into the unsharded model and
// optimizer state (the vocabulary padding dropped, as export-hf writes it), and each rank of
// the new size cuts its shard out of that, filling its own padding rows with zeros: padding
// rows start at zero and stay there (the decoder masks them, so they get no gradient, and a
// zero value with zero moments stays zero under AdamW's decay). Replicated tensors are equal on
// every rank and come from rank 0. Nothing else in a checkpoint depends on the tensor-parallel
// size: the samples, the dropout masks (counters over global indices) and the step count do
// not, so the run continues on the old trajectory within float rounding (a row-parallel
// all-reduce sums in another order). Two kinds of state are not resharded and are refused:
// ZeRO-1 shards (element ranges of the tensor-parallel shards, Note [ZeRO-1 checkpoints reshard
// by element ranges]) and compression state (per rank and per bucket layout).

// A checkpoint's tensors as one unsharded model: Hugging Face names, shapes of the unsharded
// model (valid extent), dtypes as stored.
struct MergedCheckpoint {
  std::map<std::string, core::HostArray> model;      // model-tpXX.safetensors
  std::map<std::string, core::HostArray> optimizer;  // optimizer-tpXX.safetensors (P.exp_avg, ..., step)
};

// The model files model-tp00 .. model-tp(tp-1) of `dir` merged over the tensor-parallel ranks,
// and with `with_optimizer` the (non-ZeRO) optimizer files too. A tensor named P, or
// P.exp_avg, P.exp_avg_sq or P.master, takes P's layout from the model file's memtrain_shards;
// one without a layout is replicated and comes from rank 0. Throws RuntimeError naming the
// file when a file is missing or unreadable, a layout is malformed or does not fit the
// tensor, or the ranks disagree on the tensors they hold.
MergedCheckpoint merge_tensor_parallel_checkpoint(const std::string& dir, int tp, bool with_optimizer);

// Copies this rank's shard of `whole` (an unsharded tensor from merge_tensor_parallel_shards)
// into `t`, laid out by `spec`; indices at or beyond spec.valid_extent are set to zero. A
// replicated spec copies `whole` as it is. Throws RuntimeError "<source>: tensor NAME is F16
// [..], the model's shard needs F32 [..]" when the dtype or the unsharded shape does not match.
void copy_shard_into(core::Tensor& t, const models::ShardSpec& spec, const core::HostArray& whole,
                     const std::string& name, const std::string& source);

}  // namespace memtrain::train
