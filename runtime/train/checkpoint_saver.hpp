#pragma once
// Saving the training state of one step as a checkpoint (runtime/checkpoint/ writes the files).
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "comms/gradient_compressor.hpp"
#include "comms/process_grid.hpp"
#include "models/parameter.hpp"
#include "runtime/checkpoint/durable_file.hpp"
#include "runtime/config/config.hpp"
#include "runtime/core/safetensors.hpp"
#include "runtime/train/loss_scaler.hpp"
#include "runtime/train/optimizer.hpp"
#include "runtime/train/pool_record.hpp"

namespace memtrain::train {

// Note [A checkpoint needs no RNG state and no data cursor]
// memtrain's randomness is counter-based: every sample is a function of (seed, global sample
// index), every dropout mask of (seed, step, layer, site, global token indices), and step s
// (from 0) takes the samples from s x global_batch_size on (BatchPlan, train_step). The state
// that evolves is therefore only what this checkpoint stores: the parameters (as stored, 16-bit
// included), the optimizer's moments, fp32 masters and step count, and the loss scaler. The
// step number is the data cursor (meta.json: step, consumed_samples). A feature that adds a
// stateful random stream or an iterator with a position must add it here, or this stops
// being true.

// The per-rank files of a checkpoint directory: "model-tp00.safetensors",
// "optimizer-tp00.safetensors", and with ZeRO-1 one optimizer file per shard,
// "optimizer-tp00-dp01.safetensors" (dp_rank >= 0). The saver, the loader and export-hf all use
// these names.
std::string model_file_name(int tp_rank);
std::string optimizer_file_name(int tp_rank, int dp_rank = -1);
// "compression-tp00-dp01.safetensors": one rank's compression state (Note [Compression state in
// checkpoints], comms/gradient_compressor.hpp).
std::string compression_file_name(int tp_rank, int dp_rank);

// What one checkpoint is written from; the references must outlive the call.
struct CheckpointSource {
  const Config& config;
  const std::vector<models::Parameter>& params;
  const Optimizer& optimizer;  // its state() is written (Note [Optimizer state in checkpoints])
  const LossScaler& scaler;
  std::string canonical_config_yaml;
  std::string config_hash;
  // The gradient synchroniser's compressor (compression.method), null without one.
  const comms::GradientCompressor* gradient_compressor = nullptr;
  // TrainingData::data_key, recorded in meta.json (empty: not recorded).
  std::string data_key;
  // meta.json "trusted": the health checks of this step passed before it was written
  // (Note [A checkpoint is trusted once a health check has passed]).
  bool trusted = true;
  // meta.json "bf16_gemm": the path the run's bf16 GEMMs took, "native" (oneDNN) or "fp32"
  // (Bf16GemmChoice::recorded_path, Note [bf16_gemm: auto measures the step's GEMMs]); empty:
  // not recorded (not a bf16 run on the CPU).
  std::string bf16_gemm;
  // meta.json "pool": the shared pool's record of the run up to this step (Note [A pool record
  // travels with the checkpoints]); none outside a pool (memory.admission: fail).
  std::optional<PoolRecord> pool = std::nullopt;
};

// The safetensors files one rank writes, as views of the bytes they are written from (the live
// tensors, or a staging copy of them). "step" points into `step_bytes`, which a move keeps in
// place. With ZeRO-1 every data-parallel rank writes its shard's optimizer file, holding for
// each parameter it has a piece of <name>.exp_avg, <name>.exp_avg_sq and <name>.master as
// [length] f32, and the metadata "memtrain_zero_pieces" {name: [offset, length]} (offsets in
// the parameter's flat order), so a load onto another data-parallel size can reshard.
struct RankFiles {
  std::string model_name;                             // empty: this rank writes no model file (dp_rank > 0)
  std::string optimizer_name;                         // empty: no optimizer file (replicated state, dp_rank > 0)
  std::string compression_name;                       // empty: no compressor. Every rank writes its own.
  std::map<std::string, core::TensorView> model;      // <Hugging Face name> -> stored dtype
  std::map<std::string, core::TensorView> optimizer;  // exp_avg, exp_avg_sq, master, "step"
  std::map<std::string, std::string> model_metadata;
  std::map<std::string, std::string> optimizer_metadata;
  // "gradient_sync.<name>" and "onebit_adam.<name>" of each compressor's state(), and its
  // flags as "<prefix>.flags" (I32).
  std::map<std::string, core::TensorView> compression;
  std::map<std::string, std::string> compression_metadata;
  std::vector<std::byte> step_bytes;          // the optimizer's step count, int64
  std::vector<std::vector<std::byte>> owned;  // bytes the flags' views point into
};

// This rank's files of `source`, viewing its tensors in place: the optimizer's state() in its
// replicated or sharded form (Note [Optimizer state in checkpoints], optimizer.hpp).
RankFiles rank_files(const CheckpointSource& source, int tp_rank, int dp_rank);

// The compressors whose per-rank state a checkpoint holds, with the prefix of their arrays:
// "gradient_sync" for the synchroniser's (`gradient_compressor`, may be null), then the
// optimizer's own (OptimizerState::compressors, "onebit_adam"). The saver, the loader and the
// staging size all use this list.
std::vector<std::pair<std::string, comms::GradientCompressor*>> checkpointed_compressors(
    const comms::GradientCompressor* gradient_compressor, const OptimizerState& state);
// Bytes of every tensor in `files` (the headers excluded): what a staging copy holds.
std::int64_t tensor_bytes(const RankFiles& files);
// `files` with every tensor's bytes copied into `staging` (at least tensor_bytes(files) bytes),
// in name order, and the views pointing there. Throws memtrain::RuntimeError when it is smaller.
RankFiles copy_into(const RankFiles& files, std::span<std::byte> staging);
// Writes files' safetensors files into `dir`, each fsynced (write_file_durably).
void write_rank_files(const RankFiles& files, const std::string& dir, checkpoint::WriteBudget* budget);

// What rank 0 writes besides its rank files, captured at the step: trainer_state.json (the
// loss scaler), config.yaml and meta.json (without "files", which the commit adds).
struct RootFiles {
  std::string trainer_state_json;
  std::string config_yaml;
  nlohmann::ordered_json meta;
  int keep_last = 2;
};
RootFiles root_files(const CheckpointSource& source, const comms::ProcessGrid& grid, std::int64_t step);
// Writes the root files into root/step-NNNNNNNN.tmp/ and commits the checkpoint
// (checkpoint::commit_checkpoint); returns its final path. Throws memtrain::RuntimeError.
std::string commit_root_files(const std::string& checkpoints_root, std::int64_t step, RootFiles files,
                              checkpoint::WriteBudget* budget);

// Writes run_dir/checkpoints/step-NNNNNNNN/ after optimizer step `step` (1-based count of
// completed steps); collective over grid.world(). Files: model-tpXX.safetensors (parameters
// with Hugging Face names, this tensor-parallel rank's shards, vocabulary padding included and
// recorded in the metadata), optimizer-tpXX.safetensors (<name>.exp_avg, <name>.exp_avg_sq,
// <name>.master for 16-bit values, and "step"), trainer_state.json (the loss scaler),
// config.yaml, meta.json and manifest.json. Data-parallel rank 0 of each tensor-parallel rank
// writes that rank's files (the replicas are equal), and with ZeRO-1 every rank its shard's
// optimizer file (RankFiles); world rank 0 commits. Returns the
// checkpoint's path (on every rank). Throws memtrain::RuntimeError on every rank when a write
// fails on any of them. async_checkpointer.hpp writes the same bytes in the background.
std::string save_checkpoint(const CheckpointSource& source, comms::ProcessGrid& grid,
                            const std::string& checkpoints_root, std::int64_t step, checkpoint::WriteBudget* budget);

}  // namespace memtrain::train
