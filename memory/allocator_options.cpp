#include "memory/allocator_options.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cmath>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

#include "memory/allocation_policy_registry.hpp"
#include "memory/byte_size.hpp"

namespace memtrain::memory {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
// PyTorch refuses max_split_size_mb <= 20: blocks under kLargeBuffer (20 MiB) are never
// oversize, so a smaller limit would do nothing.
constexpr std::size_t kMinMaxSplitSizeMb = 20;

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

[[noreturn]] void fail(std::string_view key, std::string_view value, std::string_view expected) {
  throw std::invalid_argument("MEMTRAIN_ALLOC_CONF: " + std::string(key) + " = '" + std::string(value) +
                              "' is invalid; expected " + std::string(expected));
}

}  // namespace

AllocatorOptions parse_alloc_conf(std::string_view conf) { return parse_alloc_conf(conf, AllocatorOptions{}); }

AllocatorOptions apply_alloc_conf_environment(AllocatorOptions base) {
  const char* conf = std::getenv("MEMTRAIN_ALLOC_CONF");
  if (conf == nullptr) return base;
  return parse_alloc_conf(conf, std::move(base));
}

AllocatorOptions parse_alloc_conf(std::string_view conf, AllocatorOptions base) {
  AllocatorOptions options = std::move(base);
  std::set<std::string, std::less<>> seen;
  std::size_t pos = 0;
  while (pos <= conf.size()) {
    const std::size_t comma = std::min(conf.find(',', pos), conf.size());
    const std::string_view item = trim(conf.substr(pos, comma - pos));
    const std::size_t item_pos = pos;
    pos = comma + 1;
    if (item.empty()) {
      if (trim(conf).empty()) break;
      throw std::invalid_argument("MEMTRAIN_ALLOC_CONF: empty entry at character " + std::to_string(item_pos) +
                                  " of '" + std::string(conf) + "'; expected key:value,key:value");
    }
    const std::size_t colon = item.find(':');
    if (colon == std::string_view::npos) {
      throw std::invalid_argument("MEMTRAIN_ALLOC_CONF: entry '" + std::string(item) +
                                  "' has no ':'; expected key:value");
    }
    const std::string_view key = trim(item.substr(0, colon));
    const std::string_view value = trim(item.substr(colon + 1));
    if (!seen.insert(std::string(key)).second) {
      throw std::invalid_argument("MEMTRAIN_ALLOC_CONF: key '" + std::string(key) + "' is given twice");
    }
    if (key == "policy") {
      if (find_policy(value) == nullptr) fail(key, value, "one of " + policy_name_list());
      options.policy = std::string(value);
    } else if (key == "max_split_size_mb") {
      std::size_t mb = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), mb);
      if (ec != std::errc() || end != value.data() + value.size() || value.empty()) {
        fail(key, value, "a whole number of MiB greater than 20");
      }
      if (mb <= kMinMaxSplitSizeMb) fail(key, value, "a whole number of MiB greater than 20");
      if (mb > SIZE_MAX / kMiB) fail(key, value, "a number of MiB that fits in 64 bits");
      options.max_split_size = mb * kMiB;
    } else if (key == "garbage_collection_threshold") {
      double t = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), t);
      if (ec != std::errc() || end != value.data() + value.size() || value.empty()) {
        fail(key, value, "a number strictly between 0.0 and 1.0");
      }
      if (!(t > 0.0 && t < 1.0)) fail(key, value, "a number strictly between 0.0 and 1.0");
      options.garbage_collection_threshold = t;
    } else if (key == "expandable_segments") {
      if (value == "True" || value == "true" || value == "1") {
        options.expandable_segments = true;
      } else if (value == "False" || value == "false" || value == "0") {
        options.expandable_segments = false;
      } else {
        fail(key, value, "True or False");
      }
    } else if (key == "capacity") {
      try {
        options.capacity = parse_byte_size(value);
      } catch (const std::invalid_argument&) {
        fail(key, value, "a byte size such as 40GiB, 512MiB or 1073741824");
      }
      // 0 = the device's capacity, as memory.capacity: 0 means in the config.
    } else {
      throw std::invalid_argument("MEMTRAIN_ALLOC_CONF: unknown key '" + std::string(key) +
                                  "'; expected one of policy, max_split_size_mb, garbage_collection_threshold, "
                                  "expandable_segments, capacity");
    }
  }
  validate_options(options, kUpstreamCapacityUnknown);
  return options;
}

void validate_options(const AllocatorOptions& options, std::size_t upstream_capacity) {
  const PolicyRegistration& policy = policy_registration(options.policy);
  const double t = options.garbage_collection_threshold;
  if (!(t == 0.0 || (t > 0.0 && t < 1.0))) {
    throw std::invalid_argument("garbage_collection_threshold = " + std::to_string(t) +
                                " is out of range; expected 0 (off) or a number strictly "
                                "between 0.0 and 1.0");
  }
  if (policy.validate != nullptr) policy.validate(options);
  if (t > 0.0 && options.capacity == 0 && upstream_capacity == 0) {
    throw std::invalid_argument("garbage_collection_threshold = " + std::to_string(t) +
                                " has no limit to measure against: the upstream is unbounded and no capacity is set; "
                                "set capacity (e.g. capacity:40GiB) or unset the threshold");
  }
}

bool needs_virtual_memory(const AllocatorOptions& options) {
  const PolicyRegistration* policy = find_policy(options.policy);
  return (policy != nullptr && policy->maps_pages) || options.expandable_segments;
}

std::string to_alloc_conf(const AllocatorOptions& options) {
  std::ostringstream out;
  out << "policy:" << options.policy;
  if (options.max_split_size != kMaxSplitSizeUnset) {
    out << ",max_split_size_mb:" << options.max_split_size / kMiB;
  }
  if (options.garbage_collection_threshold > 0.0) {
    out << ",garbage_collection_threshold:" << options.garbage_collection_threshold;
  }
  if (options.expandable_segments) out << ",expandable_segments:True";
  if (options.capacity != 0) out << ",capacity:" << options.capacity;
  return out.str();
}

}  // namespace memtrain::memory
