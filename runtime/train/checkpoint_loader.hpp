#pragma once
// Loading a checkpoint written by save_checkpoint back into a model, its AdamW and its loss
// scaler, so that training continues on the same trajectory (docs/checkpoints.md, "Resume").
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "comms/gradient_compressor.hpp"
#include "comms/process_grid.hpp"
#include "models/parameter.hpp"
#include "runtime/config/config.hpp"
#include "runtime/core/safetensors.hpp"
#include "runtime/train/loss_scaler.hpp"
#include "runtime/train/optimizer.hpp"
#include "runtime/train/pool_record.hpp"

namespace memtrain::train {

// What meta.json of a checkpoint says about it (the fields a resume checks).
struct CheckpointMeta {
  std::int64_t step = 0;
  int tensor_model_parallel_size = 1;
  int data_parallel_size = 1;
  int lr_decay_steps = 0;
  std::string dtype;
  int zero_stage = 0;    // absent in checkpoints from before ZeRO-1 was saved: 0
  std::string data_key;  // TrainingData::data_key; empty in checkpoints from before 2026-12-05
  // The path of the run's bf16 GEMMs on the CPU, "native" or "fp32" (Note [bf16_gemm: auto
  // measures the step's GEMMs]); empty when not recorded (other runs, older checkpoints).
  std::string bf16_gemm;
  // meta.json "pool": what the shared pool did to the run up to this step (Note [A pool record
  // travels with the checkpoints]); none when not recorded.
  std::optional<PoolRecord> pool;
};

// Copies arrays[name] into `t` after checking that its dtype and shape are t's. Throws
// RuntimeError "<source>: no tensor NAME" or "<source>: tensor NAME is F16 [2, 3], the model's
// is F32 [2, 3]".
void copy_array_into(core::Tensor& t, const std::map<std::string, core::HostArray>& arrays, const std::string& name,
                     const std::string& source);

// Reads dir/meta.json. Throws RuntimeError naming the file and the field when it is missing,
// not JSON, or a field is absent or of the wrong type.
CheckpointMeta read_checkpoint_meta(const std::string& dir);

// The loss scaler's state in dir/trainer_state.json ("loss_scaler": scale, growth_tracker,
// consecutive_overflows, skipped_steps, consecutive_overflows_at_min). Throws RuntimeError
// naming the file and the field when it is missing, not JSON, or a field is absent or of the
// wrong type.
LossScaler::State read_trainer_state(const std::string& dir);

// Throws ConfigError naming both keys when the checkpoint records a data_key and `data_key`
// (TrainingData::data_key of the data about to be used) is another one: its token ids mean
// other pieces. `otherwise` ends the message's "expected the data the checkpoint was trained
// on, or ...".
void check_checkpoint_data(const std::string& dir, const CheckpointMeta& meta, const std::string& data_key,
                           const std::string& otherwise);

// The checks of load_checkpoint that need no tensors, run before the run directory is touched:
// the tensor-parallel size must be the checkpoint's with ZeRO-1 or compression, and so must the
// data-parallel size when `config`'s compressor or optimizer keeps per-rank state
// (keeps_per_rank_state, runtime/config/component_registry.hpp). A change of tensor-parallel size it accepts is said on stderr. The checkpoint's
// data_key, when it has one, must be `data_key` (TrainingData::data_key): token ids of another
// corpus or tokenizer would be trained on as if they were the same. Throws ConfigError naming
// both sizes or both data keys, RuntimeError for an unreadable meta.json.
void check_checkpoint_layout(const std::string& dir, const Config& config, int tp_size, int dp_size,
                             const std::string& data_key);

// Overwrites this rank's parameter values and fp32 masters, the optimizer's moments and step
// count, and the loss scaler's state with those of the checkpoint in `dir` (a complete,
// verified step-NNNNNNNN directory): model-tpXX.safetensors, the optimizer files of this
// rank's tensor-parallel rank, and trainer_state.json. Any data-parallel size loads: AdamW's
// state is replicated, and ZeRO-1's shards are resharded (each rank copies its pieces out of
// every shard file that overlaps them; Note [ZeRO-1 shards the buckets]). Another
// tensor-parallel size merges the checkpoint's shards and cuts this rank's out (Note
// [Resharding onto another tensor-parallel size]), except for ZeRO-1 and compression state
// (ConfigError naming both sizes). Throws RuntimeError naming the file and the tensor when a
// tensor is missing, its dtype or shape differs from the model's (a checkpoint of another
// model), or the shards do not cover a piece. The optimizer's state() says what is loaded and
// in which form (Note [Optimizer state in checkpoints]); the
// compressors' state (`gradient_compressor`'s and the optimizer's own) comes from this rank's
// compression-tpXX-dpYY file, so such a checkpoint loads only on its data-parallel size (the
// error feedback is per rank; ConfigError naming both sizes). Not collective: the caller
// reports a failure on one rank to the others (run_where).
void load_checkpoint(const std::string& dir, const comms::ProcessGrid& grid, std::vector<models::Parameter>& params,
                     Optimizer& optimizer, LossScaler& scaler,
                     comms::GradientCompressor* gradient_compressor = nullptr);

}  // namespace memtrain::train
