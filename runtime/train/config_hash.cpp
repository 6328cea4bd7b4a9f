#include "runtime/train/config_hash.hpp"

#include <xxhash.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>

#include "runtime/train/config_schema.hpp"

namespace memtrain::train {

std::string canonical_yaml(const Config& c) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  std::string open_section;
  for (const auto& key : config_keys()) {
    const auto dot = key.name.find('.');
    if (dot == std::string::npos) {  // a top-level key: keys before any section (config_keys order)
      out << YAML::Key << key.name << YAML::Value << key.get(c);
      continue;
    }
    const std::string section = key.name.substr(0, dot);
    if (section != open_section) {
      if (!open_section.empty()) out << YAML::EndMap;
      out << YAML::Key << section << YAML::Value << YAML::BeginMap;
      open_section = section;
    }
    out << YAML::Key << key.name.substr(dot + 1) << YAML::Value << key.get(c);
  }
  if (!open_section.empty()) out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string config_hash(const Config& c) {
  const std::string text = canonical_yaml(c);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(XXH64(text.data(), text.size(), 0)));
  return hex;
}

}  // namespace memtrain::train
