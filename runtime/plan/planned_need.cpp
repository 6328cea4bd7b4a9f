#include "runtime/plan/planned_need.hpp"

#include "runtime/plan/plan_step.hpp"

namespace memtrain::train {

std::size_t planned_peak_reserved_bytes(const Config& config, int world_size) {
  return static_cast<std::size_t>(measure_step(config, world_size).stats.reserved_bytes.peak);
}

}  // namespace memtrain::train
