#pragma once
// The summary printed at the end of a run.
#include <cstdint>
#include <string>

namespace memtrain::train {

struct RunSummary {
  std::int64_t steps_done = 0;
  std::int64_t max_steps = 0;
  bool interrupted = false;         // stopped by SIGINT
  double wall_s = 0;                // whole run, setup included
  double train_s = 0;               // inside training steps
  std::int64_t tokens = 0;          // input tokens trained on (all ranks)
  double final_train_loss = 0;      // loss of the last step
  double start_eval_loss = 0;       // before the first step
  double end_eval_loss = 0;
  double end_eval_accuracy = 0;     // masked-token accuracy at the end
  std::int64_t peak_allocated_bytes = 0;
  std::int64_t peak_reserved_bytes = 0;
  std::string run_dir;
};

// A block of "  key  value" lines, units spelled out (s, tokens/s, MiB).
std::string format_summary(const RunSummary& s);

}  // namespace memtrain::train
