#include "runtime/config/resume_compatibility.hpp"

#include <xxhash.h>
#include <yaml-cpp/yaml.h>

#include <array>
#include <cstdio>
#include <map>

#include "runtime/config/config_schema.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::train {
namespace {

// The tensor-parallel layout changes where sums happen, not what is summed (Note [Resharding
// onto another tensor-parallel size], tensor_parallel_shards.hpp): a resume continues within
// float rounding, as with another data-parallel size; so does the bf16 GEMM path (the same
// products, summed in another order: Note [bf16 GEMMs through oneDNN]); `auto` keeps the
// path the checkpoint records (Note [bf16_gemm: auto measures the step's GEMMs]). precision.allow_tf32 likewise
// rounds a GPU's fp32 GEMM inputs or not (nothing on the CPU); a config written before the key
// existed resumes under either value.
constexpr std::array<std::string_view, 29> kMayChange = {"precision.bf16_gemm",
                                                         "precision.allow_tf32",
                                                         "parallel.tensor_model_parallel_size",
                                                         "parallel.sequence_parallel",
                                                         "training.micro_batch_size",
                                                         "training.max_steps",
                                                         "training.lr_decay_steps",
                                                         "training.log_interval",
                                                         "training.eval_interval",
                                                         "training.eval_steps",
                                                         "training.eval_micro_batch_size",
                                                         "training.num_threads",
                                                         "data.cache_dir",
                                                         "memory.trace",
                                                         "memory.policy",
                                                         "memory.max_split_size",
                                                         "memory.garbage_collection_threshold",
                                                         "memory.expandable_segments",
                                                         "memory.capacity",
                                                         "memory.limit",
                                                         "memory.reservation",
                                                         "memory.ledger",
                                                         "memory.release_timeout",
                                                         "memory.admission",
                                                         "memory.priority",
                                                         "memory.priority_aging",
                                                         "memory.elastic",
                                                         "memory.elastic_min_micro_batch",
                                                         "memory.host_huge_pages"};

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// canonical_yaml's nested maps flattened to "section.group.key" -> scalar text.
void flatten(const YAML::Node& node, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (node.IsMap()) {
    for (const auto& kv : node) {
      const std::string key = kv.first.as<std::string>();
      flatten(kv.second, prefix.empty() ? key : prefix + "." + key, out);
    }
  } else if (node.IsScalar()) {
    out[prefix] = node.as<std::string>();
  } else if (node.IsNull()) {
    out[prefix] = "";
  }
}

}  // namespace

bool resume_may_change(std::string_view key) {
  if (starts_with(key, "health.") || starts_with(key, "checkpoint.")) return true;
  for (const auto k : kMayChange) {
    if (key == k) return true;
  }
  return false;
}

std::string trajectory_hash(const Config& config) {
  std::string text;
  for (const auto& key : config_keys()) {
    if (resume_may_change(key.name)) continue;
    text += key.name;
    text += '=';
    text += key.get(config);
    text += '\n';
  }
  text += "effective_lr_decay_steps=" + std::to_string(effective_lr_decay_steps(config.training)) + "\n";
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH64(text.data(), text.size(), 0)));
  return hex;
}

std::vector<std::string> resume_conflicts(const std::string& saved_yaml, int saved_lr_decay_steps,
                                          const Config& config) {
  std::map<std::string, std::string> saved;
  try {
    flatten(YAML::Load(saved_yaml), "", saved);
  } catch (const YAML::Exception& e) {
    throw ConfigError(std::string("the checkpoint's config.yaml is not YAML: ") + e.what());
  }
  std::vector<std::string> conflicts;
  for (const auto& key : config_keys()) {
    if (resume_may_change(key.name)) continue;
    const std::string now = key.get(config);
    const auto it = saved.find(key.name);
    if (it == saved.end()) {
      conflicts.push_back(key.name + ": not in the checkpoint's config, now " + now);
    } else if (it->second != now) {
      conflicts.push_back(key.name + ": checkpoint " + it->second + ", now " + now);
    }
  }
  const int now_decay = effective_lr_decay_steps(config.training);
  if (now_decay != saved_lr_decay_steps) {
    std::string line = "the learning-rate schedule's length (training.lr_decay_steps, 0 = max_steps): checkpoint ";
    line += std::to_string(saved_lr_decay_steps);
    line += ", now ";
    line += std::to_string(now_decay);
    line += "; set training.lr_decay_steps: ";
    line += std::to_string(saved_lr_decay_steps);
    line += " to change max_steps without changing the schedule";
    conflicts.push_back(line);
  }
  return conflicts;
}

}  // namespace memtrain::train
