#include "runtime/train/train_step.hpp"

#include <chrono>
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/core/errors.hpp"

namespace memtrain::train {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

bool has_half_grads(const std::vector<models::Parameter>& params) {
  for (const auto& p : params) {
    if (p.grad.dtype() != core::DType::f32) return true;
  }
  return false;
}

// The summed gradients of all ranks, on every rank, without a synchroniser: each bucket in
// place, after backward.
void sum_gradients(models::BertForMaskedLM& model, comms::Communicator& comm) {
  if (comm.size() <= 1) return;
  if (has_half_grads(model.parameters())) {
    throw RuntimeError("train_step: 16-bit gradients on " + std::to_string(comm.size()) +
                       " ranks need a GradientSynchronizer (its f32 staging buffer is allocated up front)");
  }
  for (auto& b : model.gradient_buckets()) {
    if (!b.buffer.dry_run()) comm.allreduce_sum(b.buffer.data<float>(), b.buffer.numel());
  }
}

// This rank's micro-batches of step `step`, and the all-reduced counts of the global batch:
// masked tokens, input tokens and model FLOPs (into r).
std::vector<core::MlmBatch> load_micro_batches(models::BertForMaskedLM& model, const data::MlmDataset& data,
                                               const BatchPlan& plan, comms::Communicator& comm, std::int64_t step,
                                               StepResult& r) {
  std::vector<core::MlmBatch> batches;
  batches.reserve(plan.accumulation_steps());
  std::int64_t counts[3] = {0, 0, 0};  // masked tokens, input tokens, sum of B x T^2
  for (int a = 0; a < plan.accumulation_steps(); ++a) {
    batches.push_back(data.batch(plan.first_sample(step, a), plan.micro_batch_size));
    const auto& b = batches.back();
    counts[0] += static_cast<std::int64_t>(b.masked_positions.size());
    counts[1] += static_cast<std::int64_t>(b.batch_size) * b.seq_length;
    counts[2] += static_cast<std::int64_t>(b.batch_size) * b.seq_length * b.seq_length;
  }
  const auto t0 = Clock::now();
  comm.allreduce_sum(counts, 3);
  r.time_comm_s += seconds_since(t0);
  r.num_masked = counts[0];
  r.num_tokens = counts[1];
  r.model_flops =
      model.step_flops(static_cast<double>(counts[1]), static_cast<double>(counts[2]), static_cast<double>(counts[0]));
  return batches;
}

// Forward and backward of every micro-batch (gradients accumulate); the summed loss of this
// rank. The last micro-batch announces its final gradients to `gradient_sync`.
double accumulate_gradients(models::BertForMaskedLM& model, const std::vector<core::MlmBatch>& batches,
                            float grad_scale, std::int64_t step, const StepSettings& settings,
                            comms::GradientSynchronizer* gradient_sync, StepResult& r) {
  double loss_sum = 0.0;
  // Only the last micro-batch's gradients are final: earlier ones accumulate without any
  // communication. The hook is removed however the step ends.
  struct HookGuard {
    models::BertForMaskedLM& m;
    ~HookGuard() { m.set_gradient_ready_hook({}); }
  } guard{model};
  for (std::size_t a = 0; a < batches.size(); ++a) {
    if (a + 1 == batches.size() && gradient_sync != nullptr) {
      gradient_sync->begin_step(step);
      model.set_gradient_ready_hook([gradient_sync](std::size_t i) { gradient_sync->mark_ready(i); },
                                    [gradient_sync](std::size_t i, const std::vector<std::int32_t>& late_rows) {
                                      gradient_sync->mark_rows_ready(i, late_rows);
                                    });
    }
    const auto stats = model.forward_backward(batches[a], grad_scale, settings.seed, static_cast<std::uint64_t>(step));
    loss_sum += stats.loss_sum;
    r.time_forward_s += stats.forward_s;
    r.time_backward_s += stats.backward_s;
  }
  return loss_sum;
}

// The gradients and the loss summed over the data-parallel group (the synchroniser's buckets,
// or each bucket in place without one).
void synchronize_gradients(models::BertForMaskedLM& model, comms::Communicator& comm,
                           comms::GradientSynchronizer* gradient_sync, double& loss_sum, StepResult& r) {
  const auto t0 = Clock::now();
  model.reduce_sequence_parallel_gradients();
  model.set_gradient_ready_hook({});
  {
    // Note [Profiling ops in the step]: the wait for what backward did not hide.
    const core::ScopedOp op(model.context().op_profile(), "gradient_sync.wait", [] {
      return core::ScopedOp::Description{"data-parallel", 0.0, 0.0};
    });
    if (gradient_sync != nullptr) {
      gradient_sync->finish();
    } else {
      sum_gradients(model, comm);
    }
  }
  if (comm.size() > 1) comm.allreduce_sum(&loss_sum, 1);
  r.time_comm_s += seconds_since(t0);
}

// The synchroniser's figures, read at every return: ZeRO-1's all-gather in optimizer.step
// adds to them. 1-bit Adam's momentum sum (optimizer.step_comm) counts as the step's
// communication too.
void record_sync(const comms::GradientSynchronizer* gradient_sync, const Optimizer& optimizer, bool stepped,
                 StepResult& r) {
  if (gradient_sync == nullptr) return;
  r.comm_bytes = gradient_sync->step_stats().bytes;
  r.uncompressed_comm_bytes = gradient_sync->step_stats().uncompressed_bytes;
  r.time_comm_exposed_s = gradient_sync->step_stats().exposed_s;
  if (const comms::GradientSyncStats* own = stepped ? optimizer.step_comm() : nullptr) {
    r.comm_bytes += own->bytes;
    r.uncompressed_comm_bytes += own->uncompressed_bytes;
  }
}

// Note [The norm pass is the overflow check]
// The global norm reads every gradient once and sums the squares in double, where no finite
// f32, bf16 or f16 value overflows: a square is at most about 1.2e77, and a sum of them stays
// finite for any tensor that fits in memory. An inf or a NaN element makes the sum inf or NaN,
// and the collectives inside grad_norm() carry it to every rank: sums propagate it, and so does 1-bit
// Adam's sketch of the summed norm (norm_sketch.hpp). So "the norm is finite" is
// exactly "every gradient element is finite", and the separate finiteness pass over all
// gradients that used to run first is gone: one read of the gradients per step instead of
// two (issue 15).
double global_grad_norm(models::BertForMaskedLM& model, Optimizer& optimizer, StepResult& r) {
  const auto t0 = Clock::now();
  double norm = 0.0;
  {
    // The global norm is its own row (torch.nn.utils.clip_grad_norm_ is a call of its own too):
    // one read of every gradient, which the optimizer.step row's 28 bytes do not count.
    const core::ScopedOp norm_op(model.context().op_profile(), "grad_norm", [&] {
      std::int64_t n = 0, bytes = 0;
      for (const auto& p : model.parameters()) {
        n += p.grad.numel();
        bytes += static_cast<std::int64_t>(p.grad.nbytes());
      }
      std::string shape = "[";
      shape += std::to_string(n) + "] gradients";
      return core::ScopedOp::Description{shape, 2.0 * static_cast<double>(n), static_cast<double>(bytes)};
    });
    norm = optimizer.grad_norm();
  }
  r.time_optimizer_s += seconds_since(t0);
  return norm;
}

// Note [Overflowing steps are skipped on every rank]
// After the gradient sum every rank holds the same gradients, yet each rank checks and the
// flag is summed anyway: the decision must be the same everywhere by construction, not by the
// accident of identical floating point (a rank that stepped while another skipped would
// diverge for the rest of the run). A skipped step leaves parameters, moments and the
// optimizer's step count untouched, as torch.cuda.amp.GradScaler.step does. In fp32 and bf16
// too (Note [One rule for steps that cannot be taken]): a NaN is skipped, not trained on.
// True when the step is skipped (r records it).
bool skipped_for_overflow(LossScaler& scaler, comms::Communicator& everyone, double norm, StepResult& r) {
  std::int64_t overflow = std::isfinite(norm) && std::isfinite(r.loss) ? 0 : 1;
  const auto t0 = Clock::now();
  if (everyone.size() > 1) everyone.allreduce_sum(&overflow, 1);
  r.time_comm_s += seconds_since(t0);
  const bool skip = scaler.update(overflow > 0);  // throws when it gives up
  r.skipped_steps = scaler.skipped_steps();
  if (skip) {
    r.skipped = true;
    r.grad_norm = std::numeric_limits<double>::quiet_NaN();
  }
  return skip;
}

// One AdamW step with the unscale and clip factor.
void apply_optimizer(models::BertForMaskedLM& model, Optimizer& optimizer, const StepSettings& settings, double norm,
                     StepResult& r) {
  const double inv_scale = 1.0 / r.loss_scale;
  const auto t0 = Clock::now();
  // AdamW's least traffic: the parameter, gradient, m and v read, the parameter, m and v
  // written, 7 four-byte values per parameter (a 16-bit gradient and value with an f32
  // master move the same 28 bytes).
  const core::ScopedOp op(model.context().op_profile(), "optimizer.step", [&] {
    std::int64_t n = 0;
    for (const auto& p : model.parameters()) n += p.value.numel();
    std::string shape = "[";
    shape += std::to_string(n) + "] parameters";
    return core::ScopedOp::Description{shape, 0.0, 28.0 * static_cast<double>(n)};
  });
  // Unscale and clip in one factor applied as the optimizer reads each gradient in f32 (fused
  // into AdamW's pass over the gradients: no pass that scales them in place first, and the
  // 16-bit gradients are never rescaled and rounded in 16 bits). The clip threshold applies to
  // the unscaled norm, as with GradScaler.unscale_ before clip_grad_norm_. Without a loss scale
  // the factor is the clip factor alone, bitwise what clipping the f32 gradients in place gave.
  r.grad_norm = norm * inv_scale;
  optimizer.step(settings.lr, inv_scale * clip_factor(r.grad_norm, settings.grad_clip));
  r.time_optimizer_s += seconds_since(t0);
}

}  // namespace

StepResult train_step(models::BertForMaskedLM& model, const data::MlmDataset& data, const BatchPlan& plan,
                      comms::Communicator& comm, Optimizer& optimizer, std::int64_t step, const StepSettings& settings,
                      LossScaler* scaler, comms::GradientSynchronizer* gradient_sync, comms::Communicator* world) {
  comms::Communicator& everyone = world != nullptr ? *world : comm;
  StepResult r;
  model.zero_grad();
  const std::vector<core::MlmBatch> batches = load_micro_batches(model, data, plan, comm, step, r);

  // Loss scaling multiplies the loss (here: its gradient, the seed of the backward pass) so
  // that small fp16 gradients do not flush to zero (Micikevicius et al. 2018, section 3.2).
  // Without a scale the expression is the fp32 one of before, bit for bit.
  r.loss_scale = scaler != nullptr ? scaler->scale() : 1.0;
  float grad_scale = r.num_masked > 0 ? 1.0f / static_cast<float>(r.num_masked) : 0.0f;
  if (r.loss_scale != 1.0 && r.num_masked > 0) {
    grad_scale = static_cast<float>(r.loss_scale / static_cast<double>(r.num_masked));
  }
  double loss_sum = accumulate_gradients(model, batches, grad_scale, step, settings, gradient_sync, r);
  synchronize_gradients(model, comm, gradient_sync, loss_sum, r);
  if (settings.after_gradients) settings.after_gradients(model);
  if (scaler != nullptr) r.skipped_steps = scaler->skipped_steps();

  if (r.num_masked == 0) {
    r.loss = std::numeric_limits<double>::quiet_NaN();
    record_sync(gradient_sync, optimizer, false, r);
    return r;
  }
  r.loss = loss_sum / static_cast<double>(r.num_masked);
  const double norm = global_grad_norm(model, optimizer, r);
  if (scaler != nullptr && skipped_for_overflow(*scaler, everyone, norm, r)) {
    record_sync(gradient_sync, optimizer, false, r);
    return r;
  }
  apply_optimizer(model, optimizer, settings, norm, r);
  record_sync(gradient_sync, optimizer, true, r);
  return r;
}

}  // namespace memtrain::train
