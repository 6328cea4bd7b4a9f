#pragma once
// The verbs of the `memtrain` program. Each add_* registers a CLI11 subcommand on `app`; its
// callback runs the verb and stores the process exit code in `exit_code`. Failures are thrown
// (ConfigError, RuntimeError, OutOfMemory, TraceFormatError) and mapped to exit codes by
// exit_status (error_report.hpp), the one place that does so.
#include <CLI/CLI.hpp>

#include <cstddef>
#include <string>

namespace memtrain::cli {

// memtrain train --config F [--set section.key=value]... [--run-dir D] [--resume MODE]
//               [--dry-run [--target D] [--non-allocator SIZE]]
void add_train_command(CLI::App& app, int& exit_code);

// memtrain plan --config F --target D [--policy P]... [--world-size N] [--set k=v]... [--json]
// Exit 0 when the configuration fits the target, 3 when it does not (kExitDoesNotFit).
void add_plan_command(CLI::App& app, int& exit_code);
inline constexpr int kExitDoesNotFit = 3;

// --non-allocator SIZE in bytes (train --dry-run, plan). Throws ConfigError naming the flag.
std::size_t parse_non_allocator_flag(const std::string& text);

// memtrain data prepare --config F [--set section.key=value]...
void add_data_command(CLI::App& app, int& exit_code);

// memtrain replay --trace FILE --policy P --capacity SIZE [--json]
void add_replay_command(CLI::App& app, int& exit_code);

// memtrain checkpoint verify DIR (exit 0 valid, 1 corrupt) | inspect DIR
void add_checkpoint_command(CLI::App& app, int& exit_code);

// memtrain export-hf CHECKPOINT OUT [--fp32] (checkpoint_export.hpp)
void add_export_command(CLI::App& app, int& exit_code);

// memtrain eval --checkpoint DIR [--input FILE.json]: one JSON object on stdout
// (checkpoint_eval.hpp).
void add_eval_command(CLI::App& app, int& exit_code);

// memtrain supervise [--max-restarts N] [--backoff S] [--min-ranks N] -- COMMAND...
// (supervisor.hpp): the last attempt's exit code.
void add_supervise_command(CLI::App& app, int& exit_code);

// memtrain top [--ledger NAME] [--once] [--json] [--serve HOST:PORT] [--interval S]: the jobs
// on a shared ledger (memory/pool_view.hpp), live, as one table, as JSON or as Prometheus text.
void add_top_command(CLI::App& app, int& exit_code);

}  // namespace memtrain::cli
