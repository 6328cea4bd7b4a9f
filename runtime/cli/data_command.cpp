#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cli/commands.hpp"
#include "runtime/config/config_loader.hpp"
#include "runtime/data/prepare_data.hpp"

namespace memtrain::cli {

namespace {

struct DataArgs {
  std::string config;
  std::vector<std::string> overrides;
};

}  // namespace

void add_data_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<DataArgs>();
  CLI::App* data = app.add_subcommand("data", "Data preparation");
  data->require_subcommand(1);
  CLI::App* prepare = data->add_subcommand(
      "prepare", "Train the tokenizer and write the token files of a config's corpus (cached in data.cache_dir)");
  prepare->add_option("--config", args->config, "Experiment YAML file, e.g. configs/tiny.yaml")->required();
  prepare->add_option("--set", args->overrides, "Override one key: section.key=value (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  prepare->callback([args, &exit_code] {
    const train::Config config = train::load_config(args->config, args->overrides);
    if (config.data.mock) {
      std::cout << "memtrain: data.mock is true: random token ids, nothing to prepare\n";
      exit_code = 0;
      return;
    }
    data::prepare_data(config.data, config.model.vocab_size, std::cout);  // reports where it went
    exit_code = 0;
  });
}

}  // namespace memtrain::cli
