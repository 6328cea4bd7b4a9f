#pragma once
// The verbs of the `memtrain` program. Each add_* registers a CLI11 subcommand on `app`; its
// callback runs the verb and stores the process exit code in `exit_code`. Failures are thrown
// (ConfigError, RuntimeError, OutOfMemory, TraceFormatError) and mapped to exit codes by
// exit_status (error_report.hpp), the one place that does so.
#include <CLI/CLI.hpp>

namespace memtrain::cli {

// memtrain train --config F [--set section.key=value]... [--run-dir D]
void add_train_command(CLI::App& app, int& exit_code);

// memtrain data prepare --config F [--set section.key=value]...
void add_data_command(CLI::App& app, int& exit_code);

// memtrain replay --trace FILE --policy P --capacity SIZE [--json]
void add_replay_command(CLI::App& app, int& exit_code);

}  // namespace memtrain::cli
