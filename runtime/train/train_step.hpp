#pragma once
// One optimizer step over a global batch: micro-batches, gradient accumulation, data-parallel
// gradient sum, clipping, AdamW.
#include <cstdint>

#include "comms/communicator.hpp"
#include "models/bert_for_masked_lm.hpp"
#include "runtime/data/mlm_dataset.hpp"
#include "runtime/train/batch_plan.hpp"
#include "runtime/train/optimizer.hpp"

namespace memtrain::train {

struct StepSettings {
  double lr = 0;
  double grad_clip = 0;     // max global gradient norm; 0 disables
  std::uint64_t seed = 0;   // dropout key (training.seed)
};

struct StepResult {
  double loss = 0;              // mean cross-entropy over the masked tokens of the global batch
  std::int64_t num_masked = 0;  // masked tokens in the global batch (all ranks)
  std::int64_t num_tokens = 0;  // input tokens (B x T summed over micro-batches and ranks)
  double grad_norm = 0;         // global norm of the summed gradients, before clipping
  // Seconds on this rank. forward and backward as the model measures them inside
  // forward_backward (StepStats); comm: the count, gradient and loss all-reduces; optimizer:
  // clipping + AdamW.
  double time_forward_s = 0;
  double time_backward_s = 0;
  double time_comm_s = 0;
  double time_optimizer_s = 0;
};

// Runs step `step` (0-based) of `plan` on this rank: zero the gradients; build this rank's
// micro-batches; all-reduce the count of masked tokens of the whole global batch so that
// grad_scale = 1 / that count (Note [The global batch does not depend on how it is split]);
// forward_backward each micro-batch (gradients accumulate); sum gradients and loss over the
// ranks; clip to settings.grad_clip; one AdamW step with settings.lr.
// A global batch without any masked token (possible only for tiny batches) updates nothing:
// loss is NaN, and the optimizer step is skipped.
StepResult train_step(models::BertForMaskedLM& model, const data::MlmDataset& data,
                      const BatchPlan& plan, comms::Communicator& comm, AdamW& optimizer,
                      std::int64_t step, const StepSettings& settings);

}  // namespace memtrain::train
