#pragma once
// The hosts of an mpirun command line, and the same command without some of them: how
// `memtrain supervise --exclude-host` relaunches a job away from a failed node
// (docs/checkpoints.md, "Supervisor").
#include <string>
#include <vector>

namespace memtrain::cli {

// Note [Leaving a host out of a relaunch]
// Open MPI takes its hosts from `--host a:2,b:2` (also -H, --host=), or from a hostfile
// (`--hostfile F`, -hostfile, --machinefile, -machinefile: lines `name [slots=N] ...`, `#`
// comments). A relaunch without host b keeps every other argument: the --host list loses b's
// entries, and a hostfile is copied without b's lines to `<run_dir>.hostfile` (the original
// may be shared and is never edited; inside the run directory the copy would make a
// directory the trainer refuses when the first attempt died before creating it). The rank count follows the slots left: -np N becomes
// min(N, slots left) when every remaining entry says its slots (an entry of --host without
// ":slots" is one slot, as in Open MPI 4); when a hostfile line leaves its slots to mpirun the
// count cannot be known here and -np stays. --min-ranks, when given, sets -np instead. The
// new data-parallel size resumes onto the same trajectory (docs/checkpoints.md, "Resume"),
// as DeepSpeed's launcher `--exclude` leaves hosts out of its hostfile. Which host failed is
// not guessed from mpirun's output: the operator, or the scheduler that found the node bad,
// names it.

// One host of the command and its slots (-1: left to mpirun).
struct HostEntry {
  std::string name;
  int slots = -1;
};

// The command with `excluded` hosts left out. `hostfile_copy` is where a filtered hostfile
// is written (its directory is created; "" checks without writing); unused for --host lists.
struct HostExclusion {
  std::vector<std::string> command;
  std::vector<HostEntry> remaining;
  int slots_left = -1;  // sum of the remaining slots; -1 when one of them is unknown
};

// Throws ConfigError (exit 2) naming the problem when the command has no --host or hostfile,
// the hostfile cannot be read, an excluded host is not among the command's hosts, or no host
// is left; RuntimeError when the copy cannot be written.
HostExclusion exclude_hosts(const std::vector<std::string>& command, const std::vector<std::string>& excluded,
                            const std::string& hostfile_copy);

}  // namespace memtrain::cli
