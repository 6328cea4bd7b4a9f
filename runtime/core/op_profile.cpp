#include "runtime/core/op_profile.hpp"

#include <algorithm>

namespace memtrain::core {

void OpProfile::add(const std::string& op, const std::string& shape, double seconds, double flops, double bytes) {
  OpStat& s = stats_[{op, shape}];
  ++s.calls;
  s.seconds += seconds;
  s.flops += flops;
  s.bytes += bytes;
  total_seconds_ += seconds;
}

nlohmann::json OpProfile::to_json() const {
  std::vector<std::pair<std::pair<std::string, std::string>, OpStat>> rows(stats_.begin(), stats_.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [key, s] : rows) {
    out.push_back({{"op", key.first},
                   {"shape", key.second},
                   {"calls", s.calls},
                   {"seconds", s.seconds},
                   {"flops", s.flops},
                   {"bytes", s.bytes}});
  }
  return out;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  out += "]";
  return out;
}

}  // namespace memtrain::core
