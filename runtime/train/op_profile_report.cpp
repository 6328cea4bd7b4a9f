#include "runtime/train/op_profile_report.hpp"

#include <cstdio>

namespace memtrain::train {

nlohmann::json op_profile_json(const core::OpProfile& profile, std::int64_t steps, double step_seconds) {
  return {{"steps", steps},
          {"step_seconds", step_seconds},
          {"op_seconds", profile.total_seconds()},
          {"ops", profile.to_json()}};
}

std::string format_op_profile(const core::OpProfile& profile, std::int64_t steps, double step_seconds) {
  std::string out;
  char line[512];
  const double per_step = steps > 0 ? 1.0 / static_cast<double>(steps) : 0.0;
  std::snprintf(line, sizeof line, "op profile of %lld steps (%.1f ms a step):\n", static_cast<long long>(steps),
                1e3 * step_seconds * per_step);
  out += line;
  std::snprintf(line, sizeof line, "  %-30s %-34s %6s %9s %6s %10s\n", "op", "shape", "calls", "ms/step", "share",
                "speed");
  out += line;
  const auto share = [&](double s) { return step_seconds > 0 ? 100.0 * s / step_seconds : 0.0; };
  double small_s = 0;
  int small = 0;
  for (const auto& row : profile.to_json()) {
    const double s = row["seconds"].get<double>();
    if (share(s) < 0.5) {
      small_s += s;
      ++small;
      continue;
    }
    const double flops = row["flops"].get<double>(), bytes = row["bytes"].get<double>();
    char speed[32] = "";
    if (s > 0 && flops > 0) std::snprintf(speed, sizeof speed, "%.1f GFLOP/s", flops / s / 1e9);
    else if (s > 0 && bytes > 0) std::snprintf(speed, sizeof speed, "%.2f GB/s", bytes / s / 1e9);
    std::snprintf(line, sizeof line, "  %-30s %-34s %6.1f %9.2f %5.1f%% %10s\n",
                  row["op"].get<std::string>().c_str(), row["shape"].get<std::string>().c_str(),
                  static_cast<double>(row["calls"].get<std::int64_t>()) * per_step, 1e3 * s * per_step, share(s),
                  speed);
    out += line;
  }
  if (small > 0) {
    std::snprintf(line, sizeof line, "  %-30s %-34s %6s %9.2f %5.1f%%\n", "(ops under 0.5% each)",
                  (std::to_string(small) + " rows").c_str(), "", 1e3 * small_s * per_step, share(small_s));
    out += line;
  }
  const double rest = step_seconds - profile.total_seconds();
  std::snprintf(line, sizeof line, "  %-30s %-34s %6s %9.2f %5.1f%%\n", "(untimed)", "", "", 1e3 * rest * per_step,
                share(rest));
  out += line;
  return out;
}

}  // namespace memtrain::train
