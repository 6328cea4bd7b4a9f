#include "runtime/plan/plan_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "memory/byte_size.hpp"
#include "memory/replay.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/plan/recompute_auto.hpp"

namespace memtrain::train {
namespace {

constexpr std::size_t kUnlimitedBytes = std::size_t{1} << 50;

std::string bytes(std::int64_t b) {
  return memory::format_byte_size(static_cast<std::size_t>(std::max<std::int64_t>(0, b)));
}

void check_policy(const std::string& policy) {
  const auto& known = memory::replay_policies();
  if (std::find(known.begin(), known.end(), policy) == known.end()) {
    throw ConfigError("--policy " + policy + ": unknown policy; expected one of " + memory::replay_policy_list());
  }
}

Config with_micro_batch(const Config& config, int micro_batch_size, int world_size) {
  Config c = config;
  c.training.micro_batch_size = micro_batch_size;
  // One micro-batch per data-parallel rank: the world's tp ranks share theirs.
  c.training.global_batch_size =
      micro_batch_size * (world_size / std::max(1, config.parallel.tensor_model_parallel_size));
  return c;
}

// Replays `step` at the target's allocator capacity, and again with no limit, so that "needs"
// is the whole demand.
// Note [needed_bytes is the unlimited replay]
// A caching policy reserves differently when its capacity is tight: on OOM it frees its cache
// and retries, so a replay at capacity can fit with fewer reserved bytes than the same policy
// reserves with room to spare (QA: pytorch at 14.25 GiB reserved 14.19 GiB, unlimited 14.31
// GiB). needed_bytes is documented as the unlimited demand, so it always comes from the
// unlimited replay; the peak figures of a fitting plan come from the replay at capacity (what
// the device would show).
struct Fit {
  memory::ReplayReport at_capacity;
  memory::ReplayReport unlimited;
  bool fits = false;
};
Fit fit(const StepMeasurement& step, const std::string& policy, const DeviceTarget& target) {
  Fit f;
  const std::size_t capacity = target.allocator_capacity();
  if (capacity > 0) {
    f.at_capacity = replay_step(step, policy, capacity);
    f.fits = f.at_capacity.num_ooms == 0;
  }
  f.unlimited = replay_step(step, policy, kUnlimitedBytes);
  return f;
}

bool fits_at_capacity(const StepMeasurement& step, const std::string& policy, const DeviceTarget& target) {
  const std::size_t capacity = target.allocator_capacity();
  return capacity > 0 && replay_step(step, policy, capacity).num_ooms == 0;
}

// Note [Largest micro-batch]; `fits(mb)` answers for micro-batch mb.
template <class Fits>
int largest_micro_batch(Fits fits) {
  if (!fits(1)) return 0;
  int good = 1, bad = 0;
  while (good < kMaxMicroBatchSearch) {
    const int next = good * 2;
    if (!fits(next)) {
      bad = next;
      break;
    }
    good = next;
  }
  if (bad == 0) return good;
  while (bad - good > 1) {
    const int mid = good + (bad - good) / 2;
    (fits(mid) ? good : bad) = mid;
  }
  return good;
}

std::string percent(double x) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f %%", 100.0 * x);
  return s;
}

nlohmann::json optional_json(const std::optional<std::int64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

nlohmann::json layer_ratio(const std::optional<std::int64_t>& measured, double reference) {
  if (!measured || *measured <= 0 || reference <= 0) return nlohmann::json();
  return static_cast<double>(*measured) / reference;
}

std::string ratio(double measured, double reference) {
  if (reference <= 0) return "n/a";
  char s[32];
  std::snprintf(s, sizeof s, "%.3f", measured / reference);
  return s;
}

}  // namespace

bool micro_batch_fits(const Config& config, int micro_batch_size, const std::string& policy, const DeviceTarget& target,
                      int world_size) {
  const auto step = measure_step(with_micro_batch(config, micro_batch_size, world_size), world_size);
  return fits_at_capacity(step, policy, target.limited_by(config.memory));
}

std::vector<PlanReport> make_plan(const Config& config_in, const DeviceTarget& target_in,
                                  const std::vector<std::string>& policies, int world_size, std::ostream& log) {
  for (const auto& p : policies) check_policy(p);
  if (world_size < 1) throw ConfigError("--world-size " + std::to_string(world_size) + ": expected at least 1");
  const DeviceTarget target = target_in.for_world_size(world_size).limited_by(config_in.memory);
  const Config config = resolve_recompute(config_in, world_size, log);
  StepMeasurement step = measure_step(config, world_size);
  const LayerActivationBytes layers = measure_layer_activation_bytes(config, world_size, step);
  // One figure when every layer is of one kind; partial recompute reports the two kinds apart.
  const std::int64_t per_layer =
      layers.partial() ? 0 : layers.checkpointed.value_or(layers.not_checkpointed.value_or(0));
  const auto non_allocator = static_cast<std::int64_t>(target.non_allocator.total());
  // The search's dry runs, shared by the policies: a trace does not depend on the policy.
  std::map<int, StepMeasurement> probes;
  auto probe = [&](int micro_batch_size) -> const StepMeasurement& {
    auto it = probes.find(micro_batch_size);
    if (it == probes.end()) {
      it = probes
               .emplace(micro_batch_size,
                        measure_step(with_micro_batch(config, micro_batch_size, world_size), world_size))
               .first;
    }
    return it->second;
  };

  std::vector<PlanReport> reports;
  for (const auto& policy : policies) {
    PlanReport r;
    r.policy = policy;
    r.target = target;
    r.world_size = world_size;
    r.config = config;
    r.activation_bytes_per_layer = per_layer;
    r.layer_activation = layers;
    const Fit f = fit(step, policy, target);
    const auto& used = f.fits ? f.at_capacity : f.unlimited;
    r.fits = f.fits;
    r.peak_allocated_bytes = static_cast<std::int64_t>(used.peak_allocated_bytes);
    r.peak_reserved_bytes = static_cast<std::int64_t>(used.peak_reserved_bytes);
    r.utilization = used.utilization;
    r.fragmentation = used.fragmentation;
    r.device_utilization = f.fits && target.capacity_bytes > 0 ? static_cast<double>(r.peak_allocated_bytes) /
                                                                     static_cast<double>(target.capacity_bytes)
                                                               : std::nan("");
    r.needed_bytes = static_cast<std::int64_t>(f.unlimited.peak_reserved_bytes) + non_allocator;
    r.max_micro_batch_size = largest_micro_batch([&](int mb) { return fits_at_capacity(probe(mb), policy, target); });
    r.max_micro_batch_size_is_lower_bound = r.max_micro_batch_size >= kMaxMicroBatchSearch;
    reports.push_back(std::move(r));
  }
  step.trace.clear();
  for (auto& r : reports) r.step = step;
  return reports;
}

std::string PlanReport::does_not_fit_line() const {
  const std::string line =
      "does not fit: needs " + bytes(needed_bytes) + ", has " + bytes(static_cast<std::int64_t>(target.capacity_bytes));
  if (target.allocator_limit == 0) return line;
  return line + " (" + target.allocator_limit_key + " = " + bytes(static_cast<std::int64_t>(target.allocator_limit)) +
         " caps the allocator at " + bytes(static_cast<std::int64_t>(target.allocator_capacity())) + "; it needs " +
         bytes(peak_reserved_bytes) + " reserved)";
}

nlohmann::json PlanReport::to_json() const {
  const auto& c = config;
  const int dp = world_size / std::max(1, c.parallel.tensor_model_parallel_size);
  const double zero_per_param = zero_bytes_per_parameter(c.precision, c.parallel.zero_stage, dp);
  // Per rank: ZeRO's bytes per parameter over the scalars this rank holds (its shards and the
  // replicated parameters), which is the whole model without tensor parallelism.
  const double zero_bytes = static_cast<double>(step.parameters_on_rank) * zero_per_param;
  const KorthikantiBytes k = korthikanti_activation_bytes(c);
  const double layer_reference = k.tensor_parallel ? *k.tensor_parallel : k.per_layer;
  nlohmann::json per_tag = nlohmann::json::object();
  for (const auto& [tag, b] : step.per_tag_peak_bytes) per_tag[tag] = b;
  const auto& na = target.non_allocator;
  nlohmann::json j;
  j["policy"] = policy;
  j["target"] = target.name;
  j["capacity_bytes"] = target.capacity_bytes;
  j["allocator_capacity_bytes"] = target.allocator_capacity();
  j["allocator_limit_bytes"] = target.allocator_limit != 0 ? nlohmann::json(target.allocator_limit) : nlohmann::json();
  j["allocator_limit_key"] =
      target.allocator_limit != 0 ? nlohmann::json(target.allocator_limit_key) : nlohmann::json();
  j["world_size"] = world_size;
  j["micro_batch_size"] = c.training.micro_batch_size;
  j["global_batch_size"] = c.training.global_batch_size;
  j["accumulation_steps"] = step.accumulation_steps;
  j["seq_length"] = c.data.seq_length;
  j["precision"] = c.precision.dtype;
  j["recompute"] = c.memory.recompute;
  j["recompute_method"] = c.memory.recompute_method;
  j["recompute_num_layers"] = c.memory.recompute_num_layers;
  j["attention"] = c.memory.attention;
  j["parameters"] = step.parameters;
  j["parameters_on_rank"] = step.parameters_on_rank;
  j["model_state_bytes"] = step.model_state.total();
  j["model_state_breakdown"] = {{"parameter", step.model_state.parameter},
                                {"gradient", step.model_state.gradient},
                                {"master_weight", step.model_state.master_weight},
                                {"optimizer_state", step.model_state.optimizer_state}};
  j["activation_peak_bytes"] = step.activation_peak_bytes;
  j["activation_bytes_per_layer"] =
      layer_activation.partial() ? nlohmann::json() : nlohmann::json(activation_bytes_per_layer);
  j["checkpointed_layers"] = layer_activation.checkpointed_layers;
  j["activation_bytes_per_checkpointed_layer"] = optional_json(layer_activation.checkpointed);
  j["activation_bytes_per_non_checkpointed_layer"] = optional_json(layer_activation.not_checkpointed);
  j["peak_allocated_bytes"] = peak_allocated_bytes;
  j["peak_reserved_bytes"] = peak_reserved_bytes;
  j["non_allocator_bytes"] = na.total();
  j["non_allocator_breakdown"] = {{"cuda_context", na.cuda_context},
                                  {"cublas_workspace", na.cublas_workspace},
                                  {"cudnn_workspace", na.cudnn_workspace},
                                  {"nccl_buffers", na.nccl_buffers},
                                  {"communication_buffers", na.communication_buffers},
                                  {"overridden", na.override_total.has_value()}};
  j["needed_bytes"] = needed_bytes;
  j["utilization"] = utilization;
  j["device_utilization"] = std::isnan(device_utilization) ? nlohmann::json() : nlohmann::json(device_utilization);
  j["fragmentation"] = fragmentation;
  j["fits"] = fits;
  j["max_micro_batch_size"] = max_micro_batch_size;
  j["max_micro_batch_size_is_lower_bound"] = max_micro_batch_size_is_lower_bound;
  j["per_tag_peak_bytes"] = per_tag;
  j["zero_stage"] = c.parallel.zero_stage;
  j["analytic"] = {
      {"zero_bytes_per_parameter", zero_per_param},
      {"zero_model_state_bytes", zero_bytes},
      {"model_state_ratio", zero_bytes > 0 ? static_cast<double>(step.model_state.total()) / zero_bytes : 0.0},
      {"korthikanti_activation_bytes_per_layer", k.per_layer},
      {"korthikanti_no_recompute_bytes_per_layer", k.no_recompute},
      {"korthikanti_selective_recompute_bytes_per_layer", k.selective_recompute},
      {"korthikanti_full_recompute_bytes_per_layer", k.full_recompute},
      {"tensor_model_parallel_size", c.parallel.tensor_model_parallel_size},
      {"sequence_parallel", c.parallel.sequence_parallel},
      // null with tensor_model_parallel_size 1 (the rows above are then the whole story).
      {"korthikanti_tensor_parallel_bytes_per_layer",
       k.tensor_parallel ? nlohmann::json(*k.tensor_parallel) : nlohmann::json()},
      // Against the tensor-parallel row when there is one (a rank's layer), else memory.recompute's.
      {"activation_per_layer_ratio",
       layer_activation.partial() ? nlohmann::json()
       : layer_reference > 0      ? nlohmann::json(static_cast<double>(activation_bytes_per_layer) / layer_reference)
                                  : nlohmann::json(0.0)},
      // Each kind of layer against its own row: checkpointed against memory.recompute's row,
      // stored against the no-recompute row (Note [Per-layer activations under partial recompute]).
      // Korthikanti has no tensor-parallel row for partial recompute: null under tp.
      {"checkpointed_layer_ratio",
       k.tensor_parallel ? nlohmann::json() : layer_ratio(layer_activation.checkpointed, k.per_layer)},
      {"non_checkpointed_layer_ratio",
       k.tensor_parallel ? nlohmann::json() : layer_ratio(layer_activation.not_checkpointed, k.no_recompute)}};
  return j;
}

std::string PlanReport::to_text() const {
  const auto& c = config;
  const auto& ms = step.model_state;
  const int dp = world_size / std::max(1, c.parallel.tensor_model_parallel_size);
  const double zero_per_param = zero_bytes_per_parameter(c.precision, c.parallel.zero_stage, dp);
  // Per rank: ZeRO's bytes per parameter over the scalars this rank holds (its shards and the
  // replicated parameters), which is the whole model without tensor parallelism.
  const double zero_bytes = static_cast<double>(step.parameters_on_rank) * zero_per_param;
  const KorthikantiBytes k = korthikanti_activation_bytes(c);
  const auto& na = target.non_allocator;
  std::ostringstream o;
  o << "memtrain plan: " << c.name << " on " << target.describe() << ", policy " << policy << ", one rank of "
    << world_size << "\n"
    << "  step             micro-batch " << c.training.micro_batch_size << " x " << step.accumulation_steps
    << " accumulation, seq " << c.data.seq_length << ", precision " << c.precision.dtype << ", recompute "
    << c.memory.recompute
    << (c.memory.recompute != "none" && c.memory.recompute_num_layers > 0
            ? " (" + c.memory.recompute_method + ", " + std::to_string(c.memory.recompute_num_layers) + " layers)"
            : std::string())
    << ", attention " << c.memory.attention << "\n"
    << "  parameters       " << step.parameters
    << (step.parameters_on_rank != step.parameters ? " (" + std::to_string(step.parameters_on_rank) + " on this rank)"
                                                   : std::string())
    << "\n"
    << "  model states     " << bytes(ms.total()) << " = parameters " << bytes(ms.parameter) << " + gradients "
    << bytes(ms.gradient) << " + master weights " << bytes(ms.master_weight) << " + optimizer state "
    << bytes(ms.optimizer_state) << "\n"
    << "    ZeRO stage " << c.parallel.zero_stage << " (" << zero_per_param << " B/param)  "
    << bytes(static_cast<std::int64_t>(zero_bytes)) << " (measured/analytic "
    << ratio(static_cast<double>(ms.total()), zero_bytes) << ")\n"
    << "  activations      peak " << bytes(step.activation_peak_bytes) << "\n";
  // Each kind of layer beside its own row of Korthikanti et al. 2022, Table 2 (16-bit, 1-byte
  // masks): Note [Per-layer activations under partial recompute].
  const auto layer_line = [&](const char* kind, const std::optional<std::int64_t>& measured, double row,
                              const char* formula) {
    o << "    per " << (*kind ? std::string(kind) + " " : std::string()) << "layer "
      << (measured && *measured > 0 ? bytes(*measured) : std::string("n/a")) << "; Korthikanti " << formula << " = "
      << bytes(static_cast<std::int64_t>(row)) << "; measured/analytic "
      << (measured ? ratio(static_cast<double>(*measured), row) : std::string("n/a")) << "\n";
  };
  const auto& la = layer_activation;
  // A tensor-parallel rank's layers are compared with the tensor-parallel row only (below).
  if (la.not_checkpointed && !k.tensor_parallel) {
    layer_line(la.checkpointed ? "stored" : "", la.not_checkpointed, k.no_recompute, "sbh(34 + 5as/h)");
  }
  if (la.checkpointed && !k.tensor_parallel) {
    const std::string kind = la.not_checkpointed ? "checkpointed (" + std::to_string(la.checkpointed_layers) + " of " +
                                                       std::to_string(la.num_layers) + ")"
                                                 : std::string();
    layer_line(kind.c_str(), la.checkpointed, k.per_layer, c.memory.recompute == "full" ? "2sbh" : "34sbh");
  }
  if (k.tensor_parallel) {
    o << "    tensor parallel " << c.parallel.tensor_model_parallel_size
      << (c.parallel.sequence_parallel ? " + sequence parallel" : "") << ": per layer of this rank "
      << (la.partial() ? std::string("n/a") : bytes(activation_bytes_per_layer)) << "; Korthikanti "
      << (c.parallel.sequence_parallel ? (c.memory.recompute == "full"        ? "2sbh/t"
                                          : c.memory.recompute == "selective" ? "34sbh/t"
                                                                              : "sbh(34/t + 5as/(ht))")
                                       : (c.memory.recompute == "full"        ? "2sbh"
                                          : c.memory.recompute == "selective" ? "sbh(10 + 24/t)"
                                                                              : "sbh(10 + 24/t + 5as/(ht))"))
      << " = " << bytes(static_cast<std::int64_t>(*k.tensor_parallel)) << "; measured/analytic "
      << (la.partial() ? std::string("n/a")
                       : ratio(static_cast<double>(activation_bytes_per_layer), *k.tensor_parallel))
      << "\n";
  } else {
    o << "    (tensor parallel row: set parallel.tensor_model_parallel_size; docs/memory-plan.md)\n";
  }
  o << "  peak per tag     ";
  std::string sep;
  for (const auto& [tag, b] : step.per_tag_peak_bytes) {
    o << sep << tag << " " << bytes(b);
    sep = "; ";
  }
  o << "\n"
    << "  peak allocated   " << bytes(peak_allocated_bytes) << "\n"
    << "  peak reserved    " << bytes(peak_reserved_bytes) << "\n"
    << "  non-allocator    " << bytes(static_cast<std::int64_t>(na.total()))
    << (na.override_total ? " (--non-allocator)"
                          : " (CUDA context " + bytes(static_cast<std::int64_t>(na.cuda_context)) + ", cuBLAS " +
                                bytes(static_cast<std::int64_t>(na.cublas_workspace)) + ", NCCL " +
                                bytes(static_cast<std::int64_t>(na.nccl_buffers)) + ")")
    << "\n"
    << (target.allocator_limit != 0
            ? "  allocator cap    " + bytes(static_cast<std::int64_t>(target.allocator_capacity())) + " (" +
                  target.allocator_limit_key + " = " + bytes(static_cast<std::int64_t>(target.allocator_limit)) + ")\n"
            : std::string())
    << "  utilization      " << percent(utilization) << " of reserved is allocated; "
    << (std::isnan(device_utilization) ? std::string("n/a (does not fit)") : percent(device_utilization))
    << " of the device\n"
    << "  fragmentation    " << ratio(fragmentation, 1.0)
    << " (1 - largest free block / free bytes in reserved segments, at peak reserved)\n"
    << "  needs            " << bytes(needed_bytes) << " of " << bytes(static_cast<std::int64_t>(target.capacity_bytes))
    << " (peak reserved with no limit + non-allocator)\n"
    << "  largest micro-batch that fits: "
    << (max_micro_batch_size_is_lower_bound
            ? "at least " + std::to_string(max_micro_batch_size) + " (the search stops there)"
            : std::to_string(max_micro_batch_size))
    << "\n"
    << "  " << (fits ? "fits" : does_not_fit_line()) << "\n";
  return o.str();
}

}  // namespace memtrain::train
