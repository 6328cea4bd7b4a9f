#include <iostream>
#include <memory>

#include "runtime/cli/commands.hpp"
#include "runtime/cli/supervisor.hpp"

namespace memtrain::cli {

void add_supervise_command(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<SupervisorOptions>();
  CLI::App* cmd = app.add_subcommand(
      "supervise", "Run a training command and relaunch it with --resume after it dies (a rank killed, a failure)");
  cmd->add_option("--max-restarts", options->max_restarts, "Relaunches before giving up (default 3)");
  cmd->add_option("--backoff", options->backoff_s,
                  "Seconds before the first relaunch (0 to 3600, default 5), doubled for each further one "
                  "up to 3600");
  cmd->add_option("--min-ranks", options->min_ranks,
                  "Relaunch with -np N (onto fewer ranks, away from a failed one; default: as launched)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--exclude-host", options->exclude_hosts,
                  "Relaunch without this host (repeatable): its entries leave mpirun's --host list or "
                  "hostfile, and -np shrinks to the slots left (default: none)")
      ->allow_extra_args(false);
  cmd->add_option("command", options->command, "The job after --, e.g. -- mpirun -np 4 memtrain train ...")->required();
  cmd->callback([options, &exit_code] { exit_code = supervise(*options, std::cerr); });
}

}  // namespace memtrain::cli
