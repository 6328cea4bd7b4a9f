#include "runtime/train/op_profile_report.hpp"

#include <cstdio>
#include <string>

namespace memtrain::train {
namespace {

// The optimizer.step rows' bytes per second (all shapes together), or 0 without one.
double optimizer_bytes_per_s(const nlohmann::json& rows) {
  double s = 0, bytes = 0;
  for (const auto& row : rows) {
    if (row["op"].get<std::string>() != "optimizer.step") continue;
    s += row["seconds"].get<double>();
    bytes += row["bytes"].get<double>();
  }
  return s > 0 ? bytes / s : 0.0;
}

// The "reference" object of op_profile_json from the profile's rows (profile.to_json()).
nlohmann::json reference_json(const nlohmann::json& rows, double step_seconds, const StepReference& reference) {
  const double flops_per_s = step_seconds > 0 ? reference.model_flops / step_seconds : 0.0;
  const double optimizer = optimizer_bytes_per_s(rows);
  return {{"sgemm_shape", reference.sgemm_shape},
          {"sgemm_flops", reference.sgemm_flops},
          {"memcpy_bytes_per_s", reference.memcpy_bytes_per_s},
          {"model_flops_per_s", flops_per_s},
          {"sgemm_fraction",
           reference.sgemm_flops > 0 ? nlohmann::json(flops_per_s / reference.sgemm_flops) : nlohmann::json(nullptr)},
          {"optimizer_memcpy_fraction", optimizer > 0 && reference.memcpy_bytes_per_s > 0
                                            ? nlohmann::json(optimizer / reference.memcpy_bytes_per_s)
                                            : nlohmann::json(nullptr)}};
}

}  // namespace

nlohmann::json op_profile_json(const core::OpProfile& profile, std::int64_t steps, double step_seconds,
                               const StepReference* reference) {
  nlohmann::json j = {{"steps", steps},
                      {"step_seconds", step_seconds},
                      {"op_seconds", profile.total_seconds()},
                      {"ops", profile.to_json()}};
  if (reference != nullptr) j["reference"] = reference_json(j["ops"], step_seconds, *reference);
  return j;
}

std::string format_op_profile(const core::OpProfile& profile, std::int64_t steps, double step_seconds,
                              const StepReference* reference) {
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
  const nlohmann::json rows = profile.to_json();
  for (const auto& row : rows) {
    const double s = row["seconds"].get<double>();
    if (share(s) < 0.5) {
      small_s += s;
      ++small;
      continue;
    }
    const double flops = row["flops"].get<double>(), bytes = row["bytes"].get<double>();
    char speed[32] = "";
    if (s > 0 && flops > 0)
      std::snprintf(speed, sizeof speed, "%.1f GFLOP/s", flops / s / 1e9);
    else if (s > 0 && bytes > 0)
      std::snprintf(speed, sizeof speed, "%.2f GB/s", bytes / s / 1e9);
    std::snprintf(line, sizeof line, "  %-30s %-34s %6.1f %9.2f %5.1f%% %10s\n", row["op"].get<std::string>().c_str(),
                  row["shape"].get<std::string>().c_str(),
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
  if (reference != nullptr) {
    const auto ref = reference_json(rows, step_seconds, *reference);
    std::snprintf(line, sizeof line, "  measured after the steps: sgemm %s %.1f GFLOP/s, memcpy %.2f GB/s\n",
                  reference->sgemm_shape.c_str(), reference->sgemm_flops / 1e9, reference->memcpy_bytes_per_s / 1e9);
    out += line;
    char f[96];
    std::snprintf(f, sizeof f, "  the step: %.1f model GFLOP/s", ref["model_flops_per_s"].get<double>() / 1e9);
    std::string fractions = f;
    if (!ref["sgemm_fraction"].is_null()) {
      std::snprintf(f, sizeof f, " = %.2f of the sgemm", ref["sgemm_fraction"].get<double>());
      fractions += f;
    }
    if (!ref["optimizer_memcpy_fraction"].is_null()) {
      std::snprintf(f, sizeof f, "; optimizer.step at %.2f of memcpy", ref["optimizer_memcpy_fraction"].get<double>());
      fractions += f;
    }
    out += fractions + "\n";
  }
  return out;
}

}  // namespace memtrain::train
