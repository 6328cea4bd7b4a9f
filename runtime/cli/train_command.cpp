#include <memory>
#include <string>
#include <vector>

#include "runtime/cli/commands.hpp"
#include "runtime/train/config_loader.hpp"
#include "runtime/train/trainer.hpp"

namespace memtrain::cli {

namespace {

struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string run_dir;
};

}  // namespace

void add_train_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Train the model of a config file (prepares its data if needed)");
  cmd->add_option("--config", args->config, "Experiment YAML file, e.g. configs/tiny.yaml")->required();
  cmd->add_option("--set", args->overrides, "Override one key: section.key=value (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  cmd->add_option("--run-dir", args->run_dir, "Run directory (default runs/<config name>-<timestamp>)");
  cmd->callback([args, &exit_code] {
    // Validation happens here, before the trainer creates anything on disk.
    const train::Config config = train::load_config(args->config, args->overrides);
    exit_code = train::run_training(config, train::RunOptions{args->run_dir});
  });
}

}  // namespace memtrain::cli
