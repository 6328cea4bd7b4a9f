#include <algorithm>
#include <iostream>
#include <memory>
#include <string>

#include "memory/allocation_policy_registry.hpp"
#include "memory/byte_size.hpp"
#include "memory/memory_stats.hpp"
#include "memory/replay.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::cli {

namespace {

struct ReplayArgs {
  std::string trace;
  std::string policy;
  std::string capacity;
  bool json = false;
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

}  // namespace

void add_replay_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ReplayArgs>();
  CLI::App* cmd =
      app.add_subcommand("replay",
                         "Replay an allocation trace (CSV op,id,bytes,stream,tag, or RMM's log) against a policy on a "
                         "simulated device");
  cmd->add_option("--trace", args->trace, "Trace CSV file")->required();
  cmd->add_option("--policy", args->policy, "Allocator policy: " + memory::replay_policy_list())->required();
  cmd->add_option("--capacity", args->capacity, "Simulated device size: 40GiB, 512MiB or bytes")->required();
  cmd->add_flag("--json", args->json, "Print one JSON object instead of text");
  cmd->callback([args, &exit_code] {
    const auto& policies = memory::replay_policies();
    if (std::find(policies.begin(), policies.end(), args->policy) == policies.end()) {
      throw ConfigError("--policy " + args->policy + ": unknown policy; expected one of " +
                        memory::replay_policy_list());
    }
    const std::size_t capacity = capacity_bytes(args->capacity);
    // A policy that maps pages (vmm_stitch) keeps a record of each 2 MiB page: an allocation of
    // 16 TiB took 1.4 GB of host memory to simulate, and one of 2^61 bytes ran the host out of memory (exit 1).
    // The largest GPUs hold well under 1 TiB.
    constexpr std::size_t kLargestStitchCapacity = std::size_t{1} << 40;
    const memory::PolicyRegistration* policy = memory::find_policy(args->policy);
    if (policy != nullptr && policy->maps_pages && capacity > kLargestStitchCapacity) {
      throw ConfigError("--capacity " + args->capacity + " with --policy " + args->policy +
                        ": larger than 1 TiB, the most its "
                        "simulation keeps a record of each 2 MiB page for; expected a device size such as 80GiB");
    }
    const memory::ReplayReport report = memory::replay_trace_file(args->trace, args->policy, capacity);
    std::cout << (args->json ? report.to_json() : report.to_text()) << "\n";
    exit_code = 0;
  });
}

}  // namespace memtrain::cli
