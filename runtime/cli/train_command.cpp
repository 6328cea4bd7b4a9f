#include <memory>
#include <string>
#include <vector>

#include "memory/byte_size.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/config/config_loader.hpp"
#include "runtime/config/config_validate.hpp"
#include "runtime/cli/device_check.hpp"
#include "runtime/config/device_target.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/plan/planned_need.hpp"
#include "runtime/plan/recompute_auto.hpp"
#include "runtime/train/trainer.hpp"

namespace memtrain::cli {

namespace {

struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string run_dir;
  bool dry_run = false;
  std::string target;
  std::string non_allocator;
  std::string resume = "auto";
  bool profile_ops = false;
  std::string progress = "auto";
};

constexpr const char* kDefaultTarget = "a100-40gb";

}  // namespace

// Parses --non-allocator SIZE (shared with plan): throws ConfigError naming the flag.
std::size_t parse_non_allocator_flag(const std::string& text) {
  try {
    return memory::parse_byte_size(text);
  } catch (const std::invalid_argument& e) {
    throw ConfigError("--non-allocator " + text + ": " + e.what());
  }
}

void add_train_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Train the model of a config file (prepares its data if needed)");
  cmd->add_option("--config", args->config, "Experiment YAML file, e.g. configs/tiny.yaml")->required();
  cmd->add_option("--set", args->overrides, "Override one key: section.key=value (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  // An empty --run-dir (an unset shell variable) would pick a fresh timestamped directory:
  // a resume the user asked for would silently start over.
  cmd->add_option("--run-dir", args->run_dir, "Run directory (default runs/<config name>-<timestamp>)")
      ->check(CLI::Validator(
          [](const std::string& dir) {
            return dir.empty() ? std::string("empty; expected a directory path, or no --run-dir for the default")
                               : std::string();
          },
          ""));
  cmd->add_flag("--dry-run", args->dry_run,
                "Allocate exactly what training would on a simulated device, without any math");
  CLI::Option* target_option = cmd->add_option(
      "--target", args->target,
      "Simulated device of --dry-run: " + train::device_target_names() + " (default " + kDefaultTarget + ")");
  cmd->add_option("--non-allocator", args->non_allocator,
                  "With --dry-run: device bytes outside the allocator (CUDA context, cuBLAS, NCCL), "
                  "replacing the target's estimate, e.g. 1GiB");
  cmd->add_option("--resume", args->resume,
                  "auto (default): resume from the run directory's newest valid checkpoint if it has "
                  "one; required: refuse to start without one; never: refuse a run directory with "
                  "checkpoints")
      ->type_name("auto|required|never");
  cmd->add_flag("--profile-ops", args->profile_ops,
                "Time every op of the training steps after the first; print the step breakdown and write "
                "op_profile.json to the run directory");
  cmd->add_option("--progress", args->progress,
                  "auto (default): the progress line is rewritten in place on a terminal, and printed "
                  "as plain lines in a file, a pipe or under mpirun (whose ranks always see a "
                  "terminal); live: always in place; lines: always plain lines")
      ->type_name("auto|live|lines");
  cmd->callback([args, target_option, &exit_code] {
    if (!args->dry_run && (!args->target.empty() || !args->non_allocator.empty())) {
      throw ConfigError(std::string(args->target.empty() ? "--non-allocator" : "--target") +
                        " needs --dry-run (a compute run uses the real device)");
    }
    // An empty --target (an unset shell variable) would silently simulate the default device.
    if (args->dry_run && target_option->count() > 0 && args->target.empty()) {
      throw ConfigError("--target is empty; expected " + train::device_target_names());
    }
    if (args->dry_run && args->resume == "required") {
      throw ConfigError("--resume required loads a checkpoint, and --dry-run loads none: use one or the other");
    }
    if (args->dry_run && args->profile_ops) {
      throw ConfigError("--profile-ops times the ops' math, and --dry-run does none: use one or the other");
    }
    train::RunOptions options{args->run_dir,
                              std::nullopt,
                              train::resolve_recompute,
                              train::parse_resume_mode(args->resume),
                              args->profile_ops,
                              train::parse_progress_mode(args->progress)};
    options.planned_peak_reserved = train::planned_peak_reserved_bytes;
    if (args->dry_run) {
      options.dry_run = train::parse_device_target(args->target.empty() ? kDefaultTarget : args->target);
      if (!args->non_allocator.empty()) {
        options.dry_run->override_non_allocator(parse_non_allocator_flag(args->non_allocator));
      }
    }
    // Validation happens here, before the trainer creates anything on disk.
    const train::Config config = train::load_config(args->config, args->overrides);
    if (!args->dry_run) {
      require_usable_device(config.device);
      train::validate_cuda_support(config);
      train::validate_compute_host(config);
    }
    exit_code = train::run_training(config, options);
  });
}

}  // namespace memtrain::cli
