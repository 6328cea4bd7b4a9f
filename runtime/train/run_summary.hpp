#pragma once
// The summary printed at the end of a run.
#include <cstdint>
#include <string>
#include <vector>

namespace memtrain::train {

struct RunSummary {
  std::int64_t steps_done = 0;
  std::int64_t max_steps = 0;
  bool interrupted = false;     // stopped by SIGINT, SIGTERM or SIGUSR1
  int stop_signal = 0;          // which, when interrupted
  double wall_s = 0;            // whole run, setup included
  double train_s = 0;           // inside training steps
  std::int64_t tokens = 0;      // input tokens trained on (all ranks)
  double final_train_loss = 0;  // loss of the last step
  double start_eval_loss = 0;   // before the first step
  double end_eval_loss = 0;
  double end_eval_accuracy = 0;  // masked-token accuracy at the end
  std::int64_t peak_allocated_bytes = 0;
  std::int64_t peak_reserved_bytes = 0;
  std::string run_dir;
  std::string precision = "fp32";  // precision.dtype
  // How a bf16 run's GEMMs ran on the CPU (bf16_gemm_summary), after the dtype; empty: nothing said.
  std::string gemm_path;
  bool loss_scaling = false;       // fp16 dynamic loss scaling was on
  double final_loss_scale = 1;     // the scale at the end (with loss_scaling)
  std::int64_t skipped_steps = 0;  // steps skipped for inf/NaN gradients (with loss_scaling)
  bool dry_run = false;            // no math ran: a throughput figure would mean nothing
  // Faults the health checks detected, one line each ("step 20: ...; rolled back to step 9").
  std::vector<std::string> health_events;
  // A job in a memory pool (memory.admission: wait): whether it stayed bit for bit on its solo
  // trajectory, and what the pool made it do. Empty: not in a pool.
  std::string pool;
};

// A block of "  key  value" lines, units spelled out (s, tokens/s, MiB). A dry run's tokens/s
// line says "dry run" instead of a number.
std::string format_summary(const RunSummary& s);

}  // namespace memtrain::train
