#pragma once
// One optimizer step measured by a dry run: what `memtrain plan` and `memory.recompute: auto`
// look at (issue 4, "memtrain plan").
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "memory/memory_stats.hpp"
#include "memory/replay.hpp"
#include "runtime/train/config.hpp"

namespace memtrain::train {

// Bytes held by the model states after the optimizer's first step (requested bytes: what the
// tensors need, before the allocator's rounding).
struct ModelStateBytes {
  std::int64_t parameter = 0;        // weights used by forward/backward (compute dtype)
  std::int64_t gradient = 0;
  std::int64_t master_weight = 0;    // f32 masters (16-bit precision only)
  std::int64_t optimizer_state = 0;  // AdamW moments
  std::int64_t total() const { return parameter + gradient + master_weight + optimizer_state; }
};

struct StepMeasurement {
  std::int64_t parameters = 0;        // trainable scalars
  int micro_batch_size = 0;
  int accumulation_steps = 0;         // micro-batches of this rank in the step
  ModelStateBytes model_state;
  std::int64_t activation_peak_bytes = 0;          // peak requested bytes of tag activation
  std::map<std::string, std::int64_t> per_tag_peak_bytes;  // tag name -> peak requested bytes
  memory::MemoryStats stats;          // under memory.policy on a device with no limit
  std::vector<memory::TraceOp> trace; // every alloc/free of the step, in order, for replay
};

// Note [What a plan measures]
// One optimizer step of one rank, as the trainer runs it: the model, AdamW, the loss scaler
// (fp16) and the gradient all-reduce (its up-front staging buffer with 16-bit gradients on
// several ranks) built as the trainer builds them, then train_step over this rank's share of
// the global batch (global_batch_size / world_size sequences, micro_batch_size at a time),
// whose optimizer step allocates the AdamW state's first use. The ranks are simulated (this
// process is rank 0 of world_size; every rank allocates alike), the batches come from
// data::MlmDataset::mock with full-length rows (masking at data.mlm_probability, keyed by
// training.seed: deterministic), so no corpus is needed and BERT-Large plans in under a second.
// It runs as a dry run on a simulated device with no limit, so the trace is the step's whole
// demand; the policies and the capacity are applied afterwards by replaying the trace.

// Measures one step of `config` on one rank of `world_size` data-parallel ranks.
// config.memory.recompute must not be "auto" (resolve it first: recompute_auto.hpp).
// Throws ConfigError when global_batch_size is not a multiple of micro_batch_size x world_size
// (naming training.global_batch_size) or the model options are invalid.
StepMeasurement measure_step(const Config& config, int world_size);

// Activation bytes one encoder layer keeps for its backward pass: the activation-tag peak of
// `config` minus that of the same config with one layer fewer (the rest of the step, the
// embeddings, head and the working set of one layer's backward, is the same in both).
// 0 for a one-layer model (nothing to subtract from). `full` is measure_step(config, ...).
std::int64_t measure_activation_bytes_per_layer(const Config& config, int world_size,
                                                const StepMeasurement& full);

// A dry-run peak under `policy` on a device of `capacity_bytes`: the trace replayed (the
// caching policies, or "planned"). num_ooms > 0 means it does not fit.
memory::ReplayReport replay_step(const StepMeasurement& step, const std::string& policy,
                                 std::size_t capacity_bytes);

}  // namespace memtrain::train
