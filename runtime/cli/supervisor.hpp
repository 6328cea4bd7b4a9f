#pragma once
// `memtrain supervise`: relaunching a training job that died, so that it resumes from its last
// checkpoint (docs/checkpoints.md, "Supervisor").
#include <ostream>
#include <string>
#include <vector>

namespace memtrain::cli {

// The longest wait before a relaunch (--backoff, and its doubling). An hour is already longer
// than a scheduler would leave a job's nodes idle; far beyond it, sleep_for's conversion to
// nanoseconds overflows and the relaunch comes at once.
inline constexpr double kMaxBackoffSeconds = 3600;

struct SupervisorOptions {
  int max_restarts = 3;                    // relaunches after abnormal exits, then give up
  double backoff_s = 5.0;                  // seconds before the first relaunch, doubled for each further one
                                           // up to kMaxBackoffSeconds
  int min_ranks = 0;                       // > 0: relaunches run with `-np min_ranks` (migration onto fewer ranks)
  std::vector<std::string> exclude_hosts;  // relaunches run without these hosts (mpirun_hosts.hpp)
  std::vector<std::string> command;        // argv: `mpirun ... memtrain train ...` or `memtrain train ...`
};

// Note [Which exits the supervisor restarts]
// A restart helps only when the job died of something outside its config: a killed rank
// (SIGKILL, OOM killer, a node lost: exit 137 or mpirun's non-zero code), a runtime failure
// (exit 1). It does not help, and is not tried, for exit 0 (done), 2 (the config or input is
// wrong: it would fail the same way again), and 130, 138, 143 (a clean stop after SIGINT,
// SIGUSR1 or SIGTERM, with the checkpoint saved: someone asked the job to stop, as torchrun's
// agent does not restart a worker group it was told to shut down). Nor when the supervisor
// itself received SIGINT, SIGTERM or SIGUSR1: it forwards the signal to the job and returns the
// job's exit code.
//
// A relaunch resumes: the command gets `--resume required` (replacing a --resume it had) once
// the run directory has a checkpoint, so a restart never silently starts over; before the first
// checkpoint it gets `--resume auto`. The command must therefore name its run directory
// (--run-dir). MEMTRAIN_FAULT is set empty for relaunches: an injected fault models one
// failure, not a job that dies the same way at every attempt.

// Runs options.command, relaunching it after abnormal exits (above) up to max_restarts times,
// logging each exit and relaunch on `log`. Returns the last attempt's exit code (128 + signal
// for a job killed by a signal). Throws ConfigError when the command is empty, names no
// --run-dir, min_ranks is set and the command has no -np/-n or a relaunch onto min_ranks ranks
// could not start (check_relaunch_world), or exclude_hosts names a host the
// command does not have (Note [Leaving a host out of a relaunch]); RuntimeError when it cannot
// be started (not found, not executable).
int supervise(const SupervisorOptions& options, std::ostream& log);

// The command of a relaunch: `--resume MODE` set, and with ranks > 0 the value of the first
// -np/-n/--np replaced. Throws ConfigError as supervise.
std::vector<std::string> relaunch_command(const std::vector<std::string>& command, const std::string& resume_mode,
                                          int ranks);

// Reads the config of `command` (its --config and --set arguments, as `train` does) and checks
// that a relaunch onto `min_ranks` ranks could start (Note [A relaunch onto fewer ranks must be
// able to start]): the tensor-parallel size divides it, the global batch splits over its
// data-parallel ranks, and no compressor keeps per-rank state. Does nothing for a command
// without --config. Throws ConfigError naming --min-ranks and the rule, or the config's own
// error.
void check_relaunch_world(const std::vector<std::string>& command, int min_ranks);

// The value of the first -np/-n/--np in `command`; 0 when absent.
int ranks_of(const std::vector<std::string>& command);

// The value of --run-dir (or --run-dir=D) in `command`; "" when absent.
std::string run_dir_of(const std::vector<std::string>& command);

}  // namespace memtrain::cli
