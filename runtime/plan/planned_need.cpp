#include "runtime/plan/planned_need.hpp"

#include <algorithm>

#include "memory/allocation_policy_registry.hpp"
#include "runtime/config/config_alloc_conf.hpp"
#include "runtime/plan/plan_step.hpp"

namespace memtrain::train {

std::size_t need_headroom_bytes(const Config& config, std::size_t largest_allocation) {
  const memory::PolicyRegistration& registration = memory::policy_registration(config.memory.policy);
  // The host's virtual-memory resource maps 2 MiB pages (host_virtual_memory_resource.hpp).
  const auto policy =
      registration.make(allocator_options(config.memory), registration.maps_pages ? std::size_t{2} << 20 : 0);
  return policy->segment_size(policy->round_size(std::max<std::size_t>(1, largest_allocation)));
}

std::size_t planned_peak_reserved_bytes(const Config& config, int world_size) {
  const StepMeasurement m = measure_step(config, world_size);
  std::size_t largest = 0;
  for (const memory::TraceOp& op : m.trace) {
    if (op.kind == memory::TraceOp::Kind::alloc) largest = std::max(largest, op.bytes);
  }
  return static_cast<std::size_t>(m.stats.reserved_bytes.peak) + need_headroom_bytes(config, largest);
}

}  // namespace memtrain::train
