#include <algorithm>
#include <charconv>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comms/process_grid.hpp"
#include "memory/out_of_memory.hpp"
#include "memory/replay.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/config/config_loader.hpp"
#include "runtime/config/device_target.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/printable.hpp"
#include "runtime/plan/plan_report.hpp"
#include "runtime/core/json_text.hpp"

namespace memtrain::cli {

namespace {

struct PlanArgs {
  std::string config;
  std::string target;
  std::vector<std::string> policies;
  std::string world_size = "1";  // parsed by parse_world_size: CLI11's message names no expectation
  std::vector<std::string> overrides;
  std::string non_allocator;
  bool json = false;
};

// --world-size N: a positive integer (all ranks: tp x dp). Throws ConfigError naming the flag.
int parse_world_size(const std::string& text) {
  int value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  constexpr int kMaxWorldSize = 1 << 20;
  if (text.empty() || ec != std::errc() || ptr != end || value < 1 || value > kMaxWorldSize) {
    throw ConfigError("--world-size " + printable(text) + ": expected an integer in [1, " +
                      std::to_string(kMaxWorldSize) + "] (ranks of the job)");
  }
  return value;
}

}  // namespace

void add_plan_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Dry-run a config's first steps and evaluations on a simulated device: does it fit, where does the memory go");
  cmd->add_option("--config", args->config, "Experiment YAML file, e.g. configs/bert-large.yaml")->required();
  cmd->add_option("--target", args->target, "Device: " + train::device_target_names())->required();
  cmd->add_option("--policy", args->policies,
                  "Allocator policy (repeatable): " + memory::replay_policy_list() + " (default memory.policy)")
      ->allow_extra_args(false);
  cmd->add_option("--world-size", args->world_size,
                  "Ranks of the job, tensor x data parallel; tensor parallel from "
                  "parallel.tensor_model_parallel_size (the plan is one rank's)")
      ->type_name("N");
  cmd->add_option("--set", args->overrides, "Override one key: section.key=value (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  cmd->add_option("--non-allocator", args->non_allocator,
                  "Device bytes outside the allocator, replacing the target's estimate, e.g. 1GiB");
  cmd->add_flag("--json", args->json, "One JSON document: an object for one policy, an array for several");
  cmd->callback([args, cmd, &exit_code] {
    const int world_size = parse_world_size(args->world_size);
    train::DeviceTarget target = train::parse_device_target(args->target, world_size);
    if (!args->non_allocator.empty()) {
      target.override_non_allocator(parse_non_allocator_flag(args->non_allocator));
    }
    const train::Config config = train::load_config(args->config, args->overrides);
    try {
      train::check_tensor_parallel_world(config, world_size);
      train::check_data_parallel_size(config, world_size / config.parallel.tensor_model_parallel_size);
    } catch (const ConfigError& e) {
      throw ConfigError("--world-size " + std::to_string(world_size) +
                        (cmd->count("--world-size") == 0 ? " (the default)" : "") + ": " + e.what());
    }
    std::vector<std::string> policies = args->policies;
    if (policies.empty()) policies.push_back(config.memory.policy);
    for (std::size_t i = 0; i < policies.size(); ++i) {  // the same report twice says nothing more
      if (std::find(policies.begin(), policies.begin() + static_cast<std::ptrdiff_t>(i), policies[i]) !=
          policies.begin() + static_cast<std::ptrdiff_t>(i)) {
        throw ConfigError("--policy " + printable(policies[i], 80) + " is given twice; expected each policy once");
      }
    }
    // The recompute: auto choice is logged to stderr so that --json keeps stdout one document.
    std::vector<train::PlanReport> reports;
    try {
      reports = train::make_plan(config, target, policies, world_size, args->json ? std::cerr : std::cout);
    } catch (const OutOfMemory& e) {
      // A dry run simulates a 1 PiB device; a config that asks for more does not fit any target,
      // which is the plan's answer (exit 3), not a failure of the plan.
      const std::string reason = std::string("needs more than the 1 PiB a plan simulates: ") + e.what();
      if (args->json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& p : policies) out.push_back({{"policy", p}, {"fits", false}, {"does_not_fit", reason}});
        std::cout << core::json_text(policies.size() == 1 ? out[0] : out, 2) << "\n";
      }
      std::cerr << "memtrain: plan: does not fit: " << reason << "\n";
      exit_code = kExitDoesNotFit;
      return;
    }
    bool all_fit = true;
    if (args->json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& r : reports) out.push_back(r.to_json());
      std::cout << core::json_text(reports.size() == 1 ? out[0] : out, 2) << "\n";
    } else {
      for (const auto& r : reports) std::cout << r.to_text();
    }
    for (const auto& r : reports) {
      if (r.fits) continue;
      all_fit = false;
      std::cerr << "memtrain: plan: " << r.policy << ": " << r.does_not_fit_line()
                << "; largest micro-batch that fits: " << r.max_micro_batch_size << "\n";
    }
    exit_code = all_fit ? 0 : kExitDoesNotFit;
  });
}

}  // namespace memtrain::cli
