#include "runtime/train/train_step.hpp"

#include <chrono>
#include <limits>
#include <vector>

namespace memtrain::train {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

StepResult train_step(models::BertForMaskedLM& model, const data::MlmDataset& data,
                      const BatchPlan& plan, comms::Communicator& comm, AdamW& optimizer,
                      std::int64_t step, const StepSettings& settings) {
  StepResult r;
  model.zero_grad();

  std::vector<models::MlmBatch> batches;
  batches.reserve(plan.accumulation_steps());
  std::int64_t counts[2] = {0, 0};  // masked tokens, input tokens
  for (int a = 0; a < plan.accumulation_steps(); ++a) {
    batches.push_back(data.batch(plan.first_sample(step, a), plan.micro_batch_size));
    counts[0] += static_cast<std::int64_t>(batches.back().masked_positions.size());
    counts[1] += static_cast<std::int64_t>(batches.back().batch_size) * batches.back().seq_length;
  }
  auto t0 = Clock::now();
  comm.allreduce_sum(counts, 2);
  r.time_comm_s += seconds_since(t0);
  r.num_masked = counts[0];
  r.num_tokens = counts[1];

  const float grad_scale = r.num_masked > 0 ? 1.0f / static_cast<float>(r.num_masked) : 0.0f;
  double loss_sum = 0.0;
  for (const auto& batch : batches) {
    const auto stats = model.forward_backward(batch, grad_scale, settings.seed,
                                              static_cast<std::uint64_t>(step));
    loss_sum += stats.loss_sum;
    r.time_forward_s += stats.forward_s;
    r.time_backward_s += stats.backward_s;
  }

  t0 = Clock::now();
  if (comm.size() > 1) {
    for (auto& p : model.parameters()) {
      if (!p.grad.dry_run()) comm.allreduce_sum(p.grad.data<float>(), p.grad.numel());
    }
    comm.allreduce_sum(&loss_sum, 1);
  }
  r.time_comm_s += seconds_since(t0);

  if (r.num_masked == 0) {
    r.loss = std::numeric_limits<double>::quiet_NaN();
    return r;
  }
  r.loss = loss_sum / static_cast<double>(r.num_masked);
  t0 = Clock::now();
  r.grad_norm = optimizer.clip_grad_norm(settings.grad_clip);
  optimizer.step(settings.lr);
  r.time_optimizer_s = seconds_since(t0);
  return r;
}

}  // namespace memtrain::train
