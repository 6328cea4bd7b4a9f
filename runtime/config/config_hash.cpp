#include "runtime/config/config_hash.hpp"

#include <xxhash.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <string>
#include <vector>

#include "runtime/config/config_schema.hpp"

namespace memtrain::train {

namespace {

// "precision.loss_scale.hysteresis" -> {"precision", "loss_scale", "hysteresis"}.
std::vector<std::string> path_of(const std::string& name) {
  std::vector<std::string> parts;
  std::size_t begin = 0;
  while (true) {
    const auto dot = name.find('.', begin);
    parts.push_back(name.substr(begin, dot - begin));
    if (dot == std::string::npos) return parts;
    begin = dot + 1;
  }
}

}  // namespace

std::string canonical_yaml(const Config& c) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  // The mappings open now: sections and nested groups (precision.loss_scale). Keys of a group
  // are contiguous in config_keys(), so each group opens once.
  std::vector<std::string> open;
  for (const auto& key : config_keys()) {
    const auto parts = path_of(key.name);
    const std::size_t depth = parts.size() - 1;
    std::size_t common = 0;
    while (common < open.size() && common < depth && open[common] == parts[common]) ++common;
    while (open.size() > common) {
      out << YAML::EndMap;
      open.pop_back();
    }
    for (std::size_t i = common; i < depth; ++i) {
      out << YAML::Key << parts[i] << YAML::Value << YAML::BeginMap;
      open.push_back(parts[i]);
    }
    out << YAML::Key << parts.back() << YAML::Value << key.get(c);
  }
  while (!open.empty()) {
    out << YAML::EndMap;
    open.pop_back();
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string config_hash(const Config& c) {
  const std::string text = canonical_yaml(c);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH64(text.data(), text.size(), 0)));
  return hex;
}

}  // namespace memtrain::train
