#pragma once
// Rank 0's view of the training steps: metrics.jsonl training lines and the progress line.
#include <cstdint>

#include "memory/memory_stats.hpp"
#include "runtime/train/metrics_writer.hpp"
#include "runtime/train/progress_line.hpp"
#include "runtime/train/train_step.hpp"

namespace memtrain::train {

struct TrainingLogSettings {
  std::int64_t max_steps = 0;
  int log_interval = 1;
  double peak_flops = 0;   // hardware peak FLOP/s of all ranks (MFU's denominator); 0 = unknown
  double sgemm_flops = 0;  // sgemm FLOP/s measured at start, all ranks (sgemm_fraction's)
  bool dry_run = false;    // speeds, mfu and sgemm_fraction are NaN (null): no math ran
};

// A training line every log_interval steps (and on demand: the last step), whose times,
// tokens_per_s and mfu are averages over the steps since the previous line, so a line
// describes its interval and not one noisy step; loss, lr and grad_norm are the logged step's.
// The progress line is updated at the same steps, or every step on a terminal.
class TrainingLog {
 public:
  TrainingLog(MetricsWriter& metrics, ProgressLine& progress, TrainingLogSettings settings);

  // Step `step` (1-based) took `wall_s` seconds on this rank. `force` logs it whatever the
  // interval. Throws RuntimeError when metrics.jsonl cannot be written.
  void record(std::int64_t step, const StepResult& r, double lr, double wall_s, const memory::MemoryStats& mem,
              bool force);
  // Writes the training line of the steps recorded since the previous line, if any (a run that
  // stops between log intervals still logs its last step). Throws as record.
  void flush(std::int64_t step, const StepResult& r, double lr, const memory::MemoryStats& mem);

  double train_s() const { return train_s_; }      // seconds in steps so far
  std::int64_t tokens() const { return tokens_; }  // input tokens so far (all ranks)

 private:
  void write(std::int64_t step, const StepResult& r, double lr, const memory::MemoryStats& mem);
  MetricsWriter& metrics_;
  ProgressLine& progress_;
  TrainingLogSettings settings_;
  double train_s_ = 0;
  std::int64_t tokens_ = 0;
  // Since the previous training line.
  int window_steps_ = 0;
  double window_wall_s_ = 0, window_forward_s_ = 0, window_backward_s_ = 0;
  double window_optimizer_s_ = 0, window_comm_s_ = 0;
  double window_tp_comm_s_ = 0, window_tp_comm_bytes_ = 0;
  double window_comm_bytes_ = 0, window_comm_exposed_s_ = 0;
  std::int64_t window_tokens_ = 0;
  double window_flops_ = 0;
};

}  // namespace memtrain::train
