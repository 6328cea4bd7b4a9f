#include "runtime/plan/recompute_auto.hpp"

#include <limits>

#include "memory/byte_size.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/plan/plan_step.hpp"

namespace memtrain::train {

std::string RecomputeChoice::describe(int total_layers) const {
  if (recompute != "full") return recompute;
  if (num_layers == 0 || num_layers >= total_layers) return "full on every layer";
  return "full on the first " + std::to_string(num_layers) + " of " + std::to_string(total_layers) + " layers";
}

std::vector<RecomputeChoice> recompute_candidates(int num_hidden_layers) {
  std::vector<RecomputeChoice> c;
  c.push_back({"none", "uniform", 0, 0});
  c.push_back({"selective", "uniform", 0, 0});
  for (int k = 1; k < num_hidden_layers; ++k) c.push_back({"full", "block", k, 0});
  c.push_back({"full", "uniform", 0, 0});
  return c;
}

Config resolve_recompute(const Config& config, int world_size, std::ostream& log) {
  if (config.memory.recompute != "auto") return config;
  const std::size_t budget = config.memory.budget;
  const int layers = config.model.num_hidden_layers;
  RecomputeChoice smallest;
  smallest.peak_reserved_bytes = std::numeric_limits<std::int64_t>::max();
  for (RecomputeChoice choice : recompute_candidates(layers)) {
    Config candidate = config;
    candidate.memory.recompute = choice.recompute;
    candidate.memory.recompute_method = choice.method;
    candidate.memory.recompute_num_layers = choice.num_layers;
    choice.peak_reserved_bytes = measure_step(candidate, world_size).stats.reserved_bytes.peak;
    if (choice.peak_reserved_bytes < smallest.peak_reserved_bytes) smallest = choice;
    if (static_cast<std::size_t>(choice.peak_reserved_bytes) <= budget) {
      log << "memtrain: memory.recompute auto: " << choice.describe(layers) << " (dry-run peak "
          << memory::format_byte_size(static_cast<std::size_t>(choice.peak_reserved_bytes)) << " reserved under "
          << config.memory.policy << ", budget " << memory::format_byte_size(budget) << ")\n";
      return candidate;
    }
  }
  const auto origin = config.origin.find("memory.budget");
  const std::string where = origin == config.origin.end() ? "" : origin->second + ": ";
  throw ConfigError(where + "memory.budget = " + memory::format_byte_size(budget) +
                    ": no recompute setting fits; the smallest dry-run peak is " +
                    memory::format_byte_size(static_cast<std::size_t>(smallest.peak_reserved_bytes)) + " reserved (" +
                    smallest.describe(layers) + ", policy " + config.memory.policy +
                    "); expected a budget of at least that, or a smaller micro_batch_size");
}

}  // namespace memtrain::train
