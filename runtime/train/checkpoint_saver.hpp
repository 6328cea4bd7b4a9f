#pragma once
// Saving the training state of one step as a checkpoint (runtime/checkpoint/ writes the files).
#include <cstdint>
#include <string>
#include <vector>

#include "comms/process_grid.hpp"
#include "models/parameter.hpp"
#include "runtime/checkpoint/durable_file.hpp"
#include "runtime/config/config.hpp"
#include "runtime/train/loss_scaler.hpp"
#include "runtime/train/optimizer.hpp"

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

// The per-tensor-parallel-rank files of a checkpoint directory: "model-tp00.safetensors",
// "optimizer-tp00.safetensors" (the saver, the loader and export-hf all use these names).
std::string model_file_name(int tp_rank);
std::string optimizer_file_name(int tp_rank);

// What one checkpoint is written from; the references must outlive the call.
struct CheckpointSource {
  const Config& config;
  const std::vector<models::Parameter>& params;
  const Optimizer& optimizer;  // AdamW (config rules refuse checkpoints with the others)
  const LossScaler& scaler;
  std::string canonical_config_yaml;
  std::string config_hash;
};

// Writes run_dir/checkpoints/step-NNNNNNNN/ after optimizer step `step` (1-based count of
// completed steps); collective over grid.world(). Files: model-tpXX.safetensors (parameters
// with Hugging Face names, this tensor-parallel rank's shards, vocabulary padding included and
// recorded in the metadata), optimizer-tpXX.safetensors (<name>.exp_avg, <name>.exp_avg_sq,
// <name>.master for 16-bit values, and "step"), trainer_state.json (the loss scaler),
// config.yaml, meta.json and manifest.json. Data-parallel rank 0 of each tensor-parallel rank
// writes that rank's files (the replicas are equal); world rank 0 commits. Returns the
// checkpoint's path (on every rank). Throws memtrain::RuntimeError on every rank when a write
// fails on any of them.
std::string save_checkpoint(const CheckpointSource& source, comms::ProcessGrid& grid,
                            const std::string& checkpoints_root, std::int64_t step,
                            checkpoint::WriteBudget* budget);

}  // namespace memtrain::train
