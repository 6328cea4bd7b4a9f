#pragma once
// One optimizer step over a global batch: micro-batches, gradient accumulation, data-parallel
// gradient sum, the fp16 overflow check, clipping, AdamW.
#include <cstdint>
#include <functional>

#include "comms/communicator.hpp"
#include "comms/gradient_synchronizer.hpp"
#include "models/bert_for_masked_lm.hpp"
#include "runtime/data/mlm_dataset.hpp"
#include "runtime/train/batch_plan.hpp"
#include "runtime/train/loss_scaler.hpp"
#include "runtime/train/optimizer.hpp"

namespace memtrain::train {

struct StepSettings {
  double lr = 0;
  double grad_clip = 0;    // max global gradient norm; 0 disables
  std::uint64_t seed = 0;  // dropout key (training.seed)
  // Called on this rank once its gradients are summed, before they are checked for inf/NaN
  // (MEMTRAIN_FAULT=nan_grad); unset: nothing.
  std::function<void(models::BertForMaskedLM&)> after_gradients{};
};

struct StepResult {
  double loss = 0;              // mean cross-entropy over the masked tokens of the global batch
  std::int64_t num_masked = 0;  // masked tokens in the global batch (all ranks)
  std::int64_t num_tokens = 0;  // input tokens (B x T summed over micro-batches and ranks)
  // Model FLOPs of the step (BertForMaskedLM::step_flops of its micro-batches on every rank).
  double model_flops = 0;
  double grad_norm = 0;  // global norm of the summed, unscaled gradients, before clipping
                         // (NaN on a skipped step)
  // Seconds on this rank. forward and backward as the model measures them inside
  // forward_backward (StepStats); comm: the count, gradient, overflow-flag and loss
  // all-reduces; optimizer: the overflow check, clipping + AdamW.
  double time_forward_s = 0;
  double time_backward_s = 0;
  double time_comm_s = 0;
  double time_optimizer_s = 0;
  // Data-parallel gradient synchronisation (comms::GradientSyncStats): payload bytes this rank
  // handed to its collectives, and the seconds the step waited for them after backward (the
  // part not hidden behind backward; also inside time_comm_s). 0 with one data-parallel rank.
  std::int64_t comm_bytes = 0;
  double time_comm_exposed_s = 0;
  // What comm_bytes would have been uncompressed (= comm_bytes without compression.method):
  // metrics.jsonl compression_ratio is their quotient.
  std::int64_t uncompressed_comm_bytes = 0;
  // Tensor-parallel collectives of the step (inside forward and backward, so also part of
  // time_forward_s and time_backward_s): seconds and bytes this rank handed to them
  // (comms::CountingCommunicator). Filled by the trainer; 0 without tensor parallelism.
  double time_tp_comm_s = 0;
  std::int64_t tp_comm_bytes = 0;
  // Dynamic loss scaling (fp16): the scale the loss gradient was multiplied by in this step
  // (1 without a scaler), whether this step was skipped for inf/NaN gradients, and the count
  // of skipped steps of the run so far (LossScaler::skipped_steps).
  double loss_scale = 1;
  bool skipped = false;
  std::int64_t skipped_steps = 0;
};

// Runs step `step` (0-based) of `plan` on this rank: zero the gradients; build this rank's
// micro-batches; all-reduce the count of masked tokens of the whole global batch so that
// grad_scale = loss scale / that count (Note [The global batch does not depend on how it is
// split]); forward_backward each micro-batch (gradients accumulate); sum gradients and loss
// over the ranks (`gradient_sync`: its buckets start during the last micro-batch's backward,
// Note [Buckets overlap backward]; when null, each bucket is summed in place after backward,
// f32 gradients only); then
// Note [Overflowing steps are skipped on every rank]; unscale and clip to settings.grad_clip;
// one AdamW step with settings.lr.
//
// `scaler` (null: no loss scaling, as fp32 and bf16) scales the loss gradient and decides
// skips; it throws memtrain::RuntimeError when it gives up at the minimum scale. A global
// batch without any masked token (possible only for tiny batches) updates nothing: loss is NaN,
// and the optimizer step is skipped. With 16-bit gradients on more than one rank,
// `gradient_sync` is required (throws memtrain::RuntimeError when null). A failed gradient
// collective throws memtrain::RuntimeError (the step's gradients are not used).
//
// `comm` is the data-parallel group: the batch split, the counts, the loss and the gradient
// sum run over it. Under tensor parallelism (a ProcessGrid) `world` is the whole job, over
// which the fp16 overflow vote runs, since the ranks of a tensor-parallel group check
// different shards; null means `comm` is the world.
StepResult train_step(models::BertForMaskedLM& model, const data::MlmDataset& data, const BatchPlan& plan,
                      comms::Communicator& comm, Optimizer& optimizer, std::int64_t step, const StepSettings& settings,
                      LossScaler* scaler = nullptr, comms::GradientSynchronizer* gradient_sync = nullptr,
                      comms::Communicator* world = nullptr);

}  // namespace memtrain::train
