#include "runtime/config/config_alloc_conf.hpp"

#include <map>
#include <stdexcept>
#include <string_view>

#include "runtime/core/errors.hpp"
#include "runtime/core/printable.hpp"

namespace memtrain::train {

namespace {

std::string trimmed(std::string_view s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t");
  return std::string(s.substr(b, e - b + 1));
}

}  // namespace

void apply_alloc_conf(Config& c, const std::string& conf) {
  const std::string where = "MEMTRAIN_ALLOC_CONF=" + printable(conf);
  memory::AllocatorOptions parsed;
  try {
    parsed = memory::parse_alloc_conf(conf);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(where + ": " + printable(e.what()));
  }
  // parse_alloc_conf fills every field; only the keys the variable names may replace the
  // config's values, so find them (the syntax is already checked).
  const std::map<std::string, std::string> config_key = {
      {"policy", "memory.policy"},
      {"max_split_size_mb", "memory.max_split_size"},
      {"garbage_collection_threshold", "memory.garbage_collection_threshold"},
      {"expandable_segments", "memory.expandable_segments"},
      {"capacity", "memory.capacity"}};
  std::string_view rest = conf;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const std::string key = trimmed(item.substr(0, item.find(':')));
    const auto it = config_key.find(key);
    if (it == config_key.end()) continue;
    if (key == "policy") c.memory.policy = parsed.policy;
    if (key == "max_split_size_mb") c.memory.max_split_size = parsed.max_split_size;
    if (key == "garbage_collection_threshold") {
      c.memory.garbage_collection_threshold = parsed.garbage_collection_threshold;
    }
    if (key == "expandable_segments") c.memory.expandable_segments = parsed.expandable_segments;
    if (key == "capacity") c.memory.capacity = parsed.capacity;
    c.origin[it->second] = where;
  }
}

memory::AllocatorOptions allocator_options(const MemoryConfig& m) {
  memory::AllocatorOptions o;
  o.policy = m.policy;
  o.max_split_size = m.max_split_size;
  o.garbage_collection_threshold = m.garbage_collection_threshold;
  o.expandable_segments = m.expandable_segments;
  o.capacity = m.capacity;
  return o;
}

}  // namespace memtrain::train
