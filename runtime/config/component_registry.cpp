#include "runtime/config/component_registry.hpp"

namespace memtrain::train {

// The registration lists: a new component adds its line here.
const std::vector<CompressorEntry>& compressor_registry() {
  static const std::vector<CompressorEntry> entries = {
      powersgd_compressor_entry(),
      onebit_compressor_entry(),
  };
  return entries;
}

const std::vector<ComponentSettings>& optimizer_registry() {
  static const std::vector<ComponentSettings> entries = {
      adamw_optimizer_settings(),
      onebit_adam_optimizer_settings(),
  };
  return entries;
}

const CompressorEntry* find_compressor(std::string_view name) {
  for (const auto& e : compressor_registry()) {
    if (e.settings.name == name) return &e;
  }
  return nullptr;
}

const ComponentSettings* find_optimizer(std::string_view name) {
  for (const auto& e : optimizer_registry()) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::vector<std::string> compressor_names() {
  std::vector<std::string> names;
  for (const auto& e : compressor_registry()) names.push_back(e.settings.name);
  return names;
}

std::vector<std::string> optimizer_names() {
  std::vector<std::string> names;
  for (const auto& e : optimizer_registry()) names.push_back(e.name);
  return names;
}

bool keeps_per_rank_state(const Config& config) {
  const CompressorEntry* compressor = find_compressor(config.compression.method);
  const ComponentSettings* optimizer = find_optimizer(config.training.optimizer);
  return (compressor && compressor->settings.per_rank_state) || (optimizer && optimizer->per_rank_state);
}

}  // namespace memtrain::train
