#pragma once
// `memtrain plan`: will a configuration fit a device, and where does the memory go
// (issue 4, "memtrain plan")?
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/config/config.hpp"
#include "runtime/plan/plan_analytic.hpp"
#include "runtime/plan/plan_layer_activation.hpp"
#include "runtime/plan/plan_step.hpp"
#include "runtime/config/device_target.hpp"

namespace memtrain::train {

// The answer for one allocator policy. Bytes are bytes; ratios in [0, 1].
struct PlanReport {
  std::string policy;
  DeviceTarget target;  // for the world size of the plan
  int world_size = 1;
  Config config;                                // as planned (memory.recompute resolved)
  StepMeasurement step;                         // its trace is dropped once replayed (it can be large)
  std::int64_t activation_bytes_per_layer = 0;  // measured (plan_step.hpp); 0 for 1 layer
  // Checkpointed and stored layers apart (Note [Per-layer activations under partial recompute]).
  LayerActivationBytes layer_activation;
  std::int64_t peak_allocated_bytes = 0;
  std::int64_t peak_reserved_bytes = 0;
  double utilization = 0;  // peak allocated / peak reserved
  // peak allocated / target capacity; NaN (reported as n/a, JSON null) when the step does not
  // fit: the unlimited replay's peak is not on this device.
  double device_utilization = 0;
  // 1 - largest free block / free bytes in reserved segments, at peak reserved (memory_stats.hpp)
  double fragmentation = 0;
  std::int64_t needed_bytes = 0;  // peak reserved with no limit + non-allocator bytes
  bool fits = false;
  int max_micro_batch_size = 0;  // largest that fits this target (0 if none)
  // The search stopped at kMaxMicroBatchSearch while still fitting: the true largest is at least
  // max_micro_batch_size.
  bool max_micro_batch_size_is_lower_bound = false;

  // The JSON object `memtrain plan --json` prints (keys in docs/memory-plan.md).
  nlohmann::json to_json() const;
  // The text report.
  std::string to_text() const;
  // "does not fit: needs 41.20 GiB, has 40.00 GiB" (only meaningful when !fits).
  std::string does_not_fit_line() const;
};

// Note [Largest micro-batch]
// Doubling then bisection over dry runs: micro-batch 1, 2, 4, ... until one does not fit,
// then bisection between the last that fit and the first that did not. Each probe is the
// trainer's first steps and evaluations (measure_step) with one micro-batch per rank (global_batch_size = micro x world_size): the
// peak does not depend on how many micro-batches accumulate, since the gradients already
// exist. Memory grows with the micro-batch, so the first failure bounds the answer. Probes stop
// at kMaxMicroBatchSearch.
inline constexpr int kMaxMicroBatchSearch = 1 << 16;

// Does `config` with micro-batch `micro_batch_size` (one micro-batch per rank) fit `target`
// (capped by the config's memory.limit and memory.capacity, as the dry run's allocator is)
// under `policy`? The predicate the search uses, public so tests can check its answer.
bool micro_batch_fits(const Config& config, int micro_batch_size, const std::string& policy, const DeviceTarget& target,
                      int world_size);

// Plans `config` for one rank of `world_size` data-parallel ranks on `target` (the allocator
// capped by memory.limit and memory.capacity when set: DeviceTarget::limited_by), once per policy
// (every name of memory::replay_policies(): the caching policies or "planned"). `auto`
// recompute is resolved first (recompute_auto.hpp, logging to `log`). Throws ConfigError for an
// unknown policy (naming --policy and the accepted names) or a config the trainer would refuse.
std::vector<PlanReport> make_plan(const Config& config, const DeviceTarget& target,
                                  const std::vector<std::string>& policies, int world_size, std::ostream& log);

}  // namespace memtrain::train
