#pragma once
// SIGINT, SIGTERM and SIGUSR1 handling for a training run.
//
// Note [SIGINT stops after the current step]
// Killing a run mid-step would lose the metrics of the steps already done and leave the run
// directory without its summary and memory snapshot. The handler therefore only sets a flag
// (the one thing a signal handler may safely do); the trainer checks it between steps, finishes
// the logging, writes the snapshot and returns exit code 130 (128 + SIGINT, the shell's
// convention), so scripts can tell an interrupted run from a completed one (exit 0). A second
// SIGINT while stopping is not special-cased: the first one already asked to stop.
//
// SIGTERM (exit 143) and SIGUSR1 (exit 138) are handled the same way. SIGTERM is how batch
// schedulers and `kill` stop a job. SIGUSR1 is how to stop an `mpirun` job cleanly: mpirun
// forwards SIGUSR1 to every rank and then exits with the ranks' code. A Ctrl-C in mpirun's
// terminal is different: Open MPI 4.1 starts each rank in a process group of its own, answers
// the SIGINT by sending the ranks SIGTERM, stops forwarding their output, and kills them
// odls_base_sigkill_timeout (1 s) later, so the ranks stop after the current step with their
// metrics flushed but their summary may never reach the terminal, and mpirun exits 1.
// With checkpoint.interval > 0 the SIGUSR1 and SIGTERM stops write a checkpoint after that step
// (SIGINT only with checkpoint.on_interrupt); under a Ctrl-C in mpirun's terminal the second's
// grace may cut it short, which leaves the previous checkpoint (Note [A checkpoint appears
// whole or not at all]).

#include <csignal>

namespace memtrain::train {

// Installs the flag-setting SIGINT, SIGTERM and SIGUSR1 handlers for its lifetime and restores
// the previous handlers on destruction. Not nestable across threads: one run per process at a time.
class StopSignal {
 public:
  StopSignal();
  ~StopSignal();
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  // True once SIGINT, SIGTERM or SIGUSR1 arrived since construction.
  bool requested() const;
  // The first of them that arrived, 0 when none did.
  int signal() const;

 private:
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
  struct sigaction previous_usr1_ {};
};

// The process exit code of a run stopped by SIGINT (128 + SIGINT); SIGTERM: 143, SIGUSR1: 138.
inline constexpr int kInterruptedExitCode = 130;

// 128 + sig: the shell's exit code of a process stopped by `sig`.
inline constexpr int stopped_exit_code(int sig) { return 128 + sig; }

}  // namespace memtrain::train
