#include "runtime/train/training_log.hpp"

#include <limits>

namespace memtrain::train {

TrainingLog::TrainingLog(MetricsWriter& metrics, ProgressLine& progress, TrainingLogSettings settings)
    : metrics_(metrics), progress_(progress), settings_(settings) {}

void TrainingLog::record(std::int64_t step, const StepResult& r, double lr, double wall_s,
                         const memory::MemoryStats& mem, bool force) {
  train_s_ += wall_s;
  tokens_ += r.num_tokens;
  ++window_steps_;
  window_wall_s_ += wall_s;
  window_forward_s_ += r.time_forward_s;
  window_backward_s_ += r.time_backward_s;
  window_optimizer_s_ += r.time_optimizer_s;
  window_comm_s_ += r.time_comm_s;
  window_tp_comm_s_ += r.time_tp_comm_s;
  window_tp_comm_bytes_ += static_cast<double>(r.tp_comm_bytes);
  window_comm_bytes_ += static_cast<double>(r.comm_bytes);
  window_comm_exposed_s_ += r.time_comm_exposed_s;
  window_tokens_ += r.num_tokens;
  window_flops_ += r.model_flops;

  const bool log_now = force || step % settings_.log_interval == 0;
  if (progress_.live() || log_now) {
    const double seconds_per_step = train_s_ / static_cast<double>(step);
    progress_.update(
        Progress{step, settings_.max_steps, r.loss,
                 settings_.dry_run ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(tokens_) / train_s_,
                 static_cast<double>(settings_.max_steps - step) * seconds_per_step,
                 static_cast<std::size_t>(mem.allocated_bytes.current)});
  }
  if (log_now) write(step, r, lr, mem);
}

void TrainingLog::flush(std::int64_t step, const StepResult& r, double lr, const memory::MemoryStats& mem) {
  if (window_steps_ > 0) write(step, r, lr, mem);
}

void TrainingLog::write(std::int64_t step, const StepResult& r, double lr, const memory::MemoryStats& mem) {
  const double n = window_steps_;
  TrainMetrics m;
  m.step = step;
  m.loss = r.loss;
  m.lr = lr;
  m.grad_norm = r.grad_norm;
  if (settings_.dry_run) {
    // NaN is written as null: a dry run's wall time measures shape logic, not
    // training.
    m.tokens_per_s = m.mfu = m.sgemm_fraction = m.model_flops_per_s = m.peak_flops = m.sgemm_flops =
        std::numeric_limits<double>::quiet_NaN();
  } else {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    m.tokens_per_s = static_cast<double>(window_tokens_) / window_wall_s_;
    m.model_flops_per_s = window_flops_ / window_wall_s_;
    m.peak_flops = settings_.peak_flops > 0 ? settings_.peak_flops : nan;
    m.sgemm_flops = settings_.sgemm_flops > 0 ? settings_.sgemm_flops : nan;
    m.mfu = m.model_flops_per_s / m.peak_flops;
    m.sgemm_fraction = m.model_flops_per_s / m.sgemm_flops;
  }
  m.time_forward_s = window_forward_s_ / n;
  m.time_backward_s = window_backward_s_ / n;
  m.time_optimizer_s = window_optimizer_s_ / n;
  m.time_comm_s = window_comm_s_ / n;
  m.time_tp_comm_s = window_tp_comm_s_ / n;
  m.tp_comm_bytes = window_tp_comm_bytes_ / n;
  m.comm_bytes = window_comm_bytes_ / n;
  m.time_comm_exposed_s = window_comm_exposed_s_ / n;
  m.compression_ratio =
      r.comm_bytes > 0 ? static_cast<double>(r.uncompressed_comm_bytes) / static_cast<double>(r.comm_bytes) : 1.0;
  m.allocated_bytes = mem.allocated_bytes.current;
  m.reserved_bytes = mem.reserved_bytes.current;
  m.peak_allocated_bytes = mem.allocated_bytes.peak;
  m.loss_scale = r.loss_scale;
  m.skipped_steps = r.skipped_steps;
  metrics_.write(m);
  window_steps_ = 0;
  window_wall_s_ = window_forward_s_ = window_backward_s_ = 0;
  window_optimizer_s_ = window_comm_s_ = window_tp_comm_s_ = window_tp_comm_bytes_ = 0;
  window_comm_bytes_ = window_comm_exposed_s_ = 0;
  window_tokens_ = 0;
  window_flops_ = 0;
}

}  // namespace memtrain::train
