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
#include "runtime/config/config.hpp"

namespace memtrain::train {

// Bytes held by the model states after the optimizer's first step (requested bytes: what the
// tensors need, before the allocator's rounding).
struct ModelStateBytes {
  std::int64_t parameter = 0;  // weights used by forward/backward (compute dtype)
  std::int64_t gradient = 0;
  std::int64_t master_weight = 0;    // f32 masters (16-bit precision only)
  std::int64_t optimizer_state = 0;  // AdamW moments
  std::int64_t total() const { return parameter + gradient + master_weight + optimizer_state; }
};

struct StepMeasurement {
  std::int64_t parameters = 0;  // trainable scalars of the whole model
  // Scalars this rank holds: its shards (with vocabulary padding) plus the replicated
  // parameters; `parameters` without tensor parallelism.
  std::int64_t parameters_on_rank = 0;
  int micro_batch_size = 0;
  int accumulation_steps = 0;  // micro-batches of this rank in the step
  std::int64_t steps = 0;      // optimizer steps measured (measured_steps)
  ModelStateBytes model_state;
  // Peak requested bytes of tag activation during the training steps: what forward keeps for
  // backward (Korthikanti et al.'s quantity). The evaluations keep nothing for a backward pass
  // and are left out here; per_tag_peak_bytes and stats include them.
  std::int64_t activation_peak_bytes = 0;
  std::map<std::string, std::int64_t> per_tag_peak_bytes;  // tag name -> peak requested bytes
  memory::MemoryStats stats;                               // under memory.policy on a device with no limit
  // The settings of the job's loss scaler (TrainingJob: the trainer's, health included).
  LossScaleConfig loss_scale;
  std::vector<memory::TraceOp> trace;  // every alloc/free of the step, in order, for replay
};

// Note [A plan measures the trainer's first steps and evaluations]
// A plan's answer ("fits", the largest micro-batch) must hold for `train` of the same config,
// and one optimizer step alone does not decide that (found by scripts/bert_large_memory.sh:
// plan's largest micro-batch ran out of memory in `train --dry-run` in 6 of 36 settings, and
// the next one fitted in one). The trainer evaluates before its first step, every
// eval_interval steps and after its last one, and no two batches mask the same number of
// tokens (binomial at data.mlm_probability), so the MLM head's [M, V] logits differ in size
// between batches. The evaluation's cached blocks, sized for the validation batch's M, stay in
// segments that also hold live tensors; the first step's larger logits then find no block of
// their size and no whole free segment to release, and the allocator runs out (fragmentation,
// not demand). At seq 128 and micro-batches of a few hundred or more, sqrt(M) x V x 4 bytes is
// as large as one more sequence, so the effect decides n versus n + 1; it shows most with
// recompute, whose small activations leave the head's tensors the largest ones.
// The plan therefore runs what the trainer runs, in its order: the evaluation at step 0, the
// first min(training.max_steps, kMaxMeasuredSteps) steps with the evaluations of
// eval_interval, and the final evaluation, each evaluation over the trainer's eval_steps
// validation batches of this rank (rank 0 evaluates batches 0, N, 2N, ...). For a run of at
// most kMaxMeasuredSteps steps on mock data, the plan and `train --dry-run` therefore see the
// same allocation sequence, and the answers agree exactly. Later steps have other masked
// counts (a difference of about sqrt(M) rows of the logits) and a corpus masks other counts
// than the mock data: leave that much room when a run is long or uses a corpus.

// Note [What a plan measures]
// The first optimizer steps of one rank and their evaluations, as the trainer runs them: the
// model, AdamW, the loss scaler (fp16) and the gradient all-reduce (its up-front staging
// buffer with 16-bit gradients on several ranks) built as the trainer builds them, then
// train_step over this rank's share of the global batch (global_batch_size / world_size
// sequences, micro_batch_size at a time). The ranks are simulated (this process is rank 0 of
// world_size; ranks allocate alike in a step, and rank 0 evaluates at least as many
// validation batches as any other rank), the batches come from
// data::MlmDataset::mock with full-length rows (masking at data.mlm_probability, keyed by
// training.seed, validation's as the trainer keys it: deterministic), so no corpus is needed.
// It runs as a dry run on a simulated device with no limit, so the trace is the run's whole
// demand; the policies and the capacity are applied afterwards by replaying the trace.

// Optimizer steps a plan runs (Note [A plan measures the trainer's first steps ...]): the
// second step is the first on a warm cache, the third the first after it.
inline constexpr std::int64_t kMaxMeasuredSteps = 3;
// min(max_steps, kMaxMeasuredSteps), at least 1.
std::int64_t measured_steps(std::int64_t max_steps);

// Measures the first steps and the evaluations of `config` on one rank of `world_size`
// data-parallel ranks (Note [A plan measures the trainer's first steps and evaluations]).
// config.memory.recompute must not be "auto" (resolve it first: recompute_auto.hpp).
// Throws ConfigError when global_batch_size is not a multiple of micro_batch_size x world_size
// (naming training.global_batch_size) or the model options are invalid.
StepMeasurement measure_step(const Config& config, int world_size);

// Activation bytes one encoder layer keeps for its backward pass: the activation-tag peak of
// `config` minus that of the same config with one layer fewer (the rest of the step, the
// embeddings, head and the working set of one layer's backward, is the same in both).
// 0 for a one-layer model (nothing to subtract from). `full` is measure_step(config, ...).
std::int64_t measure_activation_bytes_per_layer(const Config& config, int world_size, const StepMeasurement& full);

// A dry-run peak under `policy` on a device of `capacity_bytes`: the trace replayed (the
// caching policies, or "planned"). num_ooms > 0 means it does not fit.
memory::ReplayReport replay_step(const StepMeasurement& step, const std::string& policy, std::size_t capacity_bytes);

}  // namespace memtrain::train
