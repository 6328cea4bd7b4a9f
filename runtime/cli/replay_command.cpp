#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memory/allocation_policy_registry.hpp"
#include "memory/byte_size.hpp"
#include "memory/memory_stats.hpp"
#include "memory/multi_job_replay.hpp"
#include "memory/replay.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/config/workload_file.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/json_text.hpp"

namespace memtrain::cli {

namespace {

struct ReplayArgs {
  std::string trace;
  std::string workload;
  std::vector<std::string> policies;
  std::string capacity;
  bool json = false;
  bool no_release = false;
};

std::size_t capacity_bytes(const std::string& text) {
  std::size_t bytes = 0;
  try {
    bytes = memory::parse_byte_size(text);
  } catch (const std::invalid_argument& e) {
    throw ConfigError("--capacity " + text + ": " + e.what());
  }
  if (bytes == 0) {
    throw ConfigError("--capacity " + text + ": " +
                      (text.find_first_of("123456789") == std::string::npos ? "zero" : "under one byte") +
                      "; expected a positive size such as 40GiB");
  }
  // The allocator's statistics are signed 64-bit counters (PyTorch's memory_stats are too).
  if (bytes > memory::kLargestAllocatorBytes) {
    throw ConfigError(
        "--capacity " + text + ": larger than " + std::to_string(memory::kLargestAllocatorBytes) +
        " bytes (4 EiB), the most the allocator's statistics count; expected a device size such as 40GiB");
  }
  return bytes;
}

// A policy that maps pages (vmm_stitch) keeps a record of each 2 MiB page: an allocation of
// 16 TiB took 1.4 GB of host memory to simulate, and one of 2^61 bytes ran the host out of memory (exit 1).
// The largest GPUs hold well under 1 TiB.
// `where` names the capacity in a message: "--capacity 2TiB", or the workload's capacity.
void check_policy(const std::string& name, std::size_t capacity, const std::string& where) {
  const auto& policies = memory::replay_policies();
  if (std::find(policies.begin(), policies.end(), name) == policies.end()) {
    throw ConfigError("--policy " + name + ": unknown policy; expected one of " + memory::replay_policy_list());
  }
  constexpr std::size_t kLargestStitchCapacity = std::size_t{1} << 40;
  const memory::PolicyRegistration* policy = memory::find_policy(name);
  if (policy != nullptr && policy->maps_pages && capacity > kLargestStitchCapacity) {
    throw ConfigError(where + " with --policy " + name +
                      ": larger than 1 TiB, the most its "
                      "simulation keeps a record of each 2 MiB page for; expected a device size such as 80GiB");
  }
}

// `replay --workload`: every policy asked for (all by default) on the workload's jobs.
void replay_workload(const ReplayArgs& args) {
  const train::Workload workload = train::load_workload(args.workload);
  std::size_t capacity = 0;
  std::string where = "--capacity " + args.capacity;
  if (!args.capacity.empty()) {
    capacity = capacity_bytes(args.capacity);
  } else if (workload.capacity_bytes) {
    capacity = *workload.capacity_bytes;  // load_workload checked it
    where = args.workload + ": capacity " + std::to_string(capacity) + " bytes";
  } else {
    throw ConfigError("--workload " + args.workload +
                      ": no capacity; expected --capacity SIZE or capacity: SIZE in the workload file");
  }
  const std::vector<std::string> policies = args.policies.empty() ? memory::replay_policies() : args.policies;
  for (const auto& p : policies) check_policy(p, capacity, where);
  // Traces are read once and shared by every policy's replay.
  std::vector<memory::JobTrace> traces;
  traces.reserve(workload.jobs.size());
  for (const auto& job : workload.jobs) traces.push_back(memory::JobTrace::read(job.trace));
  std::vector<memory::ScheduledJob> jobs;
  for (std::size_t i = 0; i < workload.jobs.size(); ++i) {
    const train::WorkloadJob& w = workload.jobs[i];
    jobs.push_back({w.name, &traces[i], w.start, w.steps.value_or(traces[i].recorded_steps()), w.repeat, w.gap});
    traces[i].check_repeatable(jobs.back().steps, w.name);
  }
  memory::MultiJobOptions options;
  options.release = !args.no_release;
  std::string json;
  for (const auto& p : policies) {
    const memory::MultiJobReport report = memory::replay_jobs(jobs, p, capacity, options);
    if (args.json) {
      json += (json.empty() ? "" : ",") + report.to_json();
    } else {
      std::cout << report.to_text();
    }
  }
  if (args.json) {
    std::cout << "{\"workload\":" << core::json_text(nlohmann::json(args.workload))
              << ",\"capacity_bytes\":" << capacity << ",\"release\":" << (options.release ? "true" : "false")
              << ",\"policies\":[" << json << "]}\n";
  }
}

}  // namespace

void add_replay_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ReplayArgs>();
  CLI::App* cmd =
      app.add_subcommand("replay",
                         "Replay an allocation trace (CSV op,id,bytes,stream,tag, or RMM's log) against a policy on a "
                         "simulated device");
  cmd->add_option("--trace", args->trace, "Trace CSV file");
  cmd->add_option("--workload", args->workload,
                  "Workload YAML: several jobs' traces on one device, each with its own allocator "
                  "(docs/workloads.md)");
  cmd->add_option(
      "--policy", args->policies,
      "Allocator policy: " + memory::replay_policy_list() + " (with --workload: one or more, every policy by default)");
  cmd->add_option("--capacity", args->capacity,
                  "Simulated device size: 40GiB, 512MiB or bytes (with --workload: default its capacity)");
  cmd->add_flag("--json", args->json, "Print one JSON object instead of text");
  cmd->add_flag("--no-release", args->no_release,
                "With --workload: no job releases its cached memory for another (Note [Cross-job release in the "
                "replay])");
  cmd->callback([args, &exit_code] {
    if (args->trace.empty() == args->workload.empty()) {
      throw ConfigError(args->trace.empty() ? "replay: no input; expected --trace FILE or --workload FILE"
                                            : "replay: both --trace and --workload; expected one of them");
    }
    if (!args->workload.empty()) {
      replay_workload(*args);
      exit_code = 0;
      return;
    }
    if (args->no_release) throw ConfigError("--no-release: only with --workload; one trace is one job");
    if (args->policies.size() != 1) {
      throw ConfigError(std::string("--policy: ") + (args->policies.empty() ? "missing" : "given more than once") +
                        " with --trace; expected one of " + memory::replay_policy_list());
    }
    if (args->capacity.empty()) throw ConfigError("--capacity: missing with --trace; expected a size such as 40GiB");
    const std::string& policy = args->policies.front();
    const std::size_t capacity = capacity_bytes(args->capacity);
    check_policy(policy, capacity, "--capacity " + args->capacity);
    const memory::ReplayReport report = memory::replay_trace_file(args->trace, policy, capacity);
    std::cout << (args->json ? report.to_json() : report.to_text()) << "\n";
    exit_code = 0;
  });
}

}  // namespace memtrain::cli
