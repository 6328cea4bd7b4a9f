#pragma once
// SIGINT handling for a training run.
//
// Note [SIGINT stops after the current step]
// Killing a run mid-step would lose the metrics of the steps already done and leave the run
// directory without its summary and memory snapshot. The handler therefore only sets a flag
// (the one thing a signal handler may safely do); the trainer checks it between steps, finishes
// the logging, writes the snapshot and returns exit code 130 (128 + SIGINT, the shell's
// convention), so scripts can tell an interrupted run from a completed one (exit 0). A second
// SIGINT while stopping is not special-cased: the first one already asked to stop.
#include <csignal>

namespace memtrain::train {

// Installs the flag-setting SIGINT handler for its lifetime and restores the previous handler
// on destruction. Not nestable across threads: one training run per process at a time.
class StopSignal {
 public:
  StopSignal();
  ~StopSignal();
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  // True once SIGINT arrived since construction.
  bool requested() const;

 private:
  struct sigaction previous_ {};
};

// The process exit code of a run stopped by SIGINT.
inline constexpr int kInterruptedExitCode = 130;

}  // namespace memtrain::train
