#include "runtime/train/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "runtime/core/errors.hpp"

namespace memtrain::train {

double LrSchedule::at(std::int64_t step) const {
  if (kind != "linear" && kind != "cosine" && kind != "constant") {
    throw ConfigError("training.lr_schedule = " + kind + "; expected linear, cosine or constant");
  }
  if (warmup_steps > 0 && step <= warmup_steps) {
    return lr * static_cast<double>(step) / static_cast<double>(warmup_steps);
  }
  if (kind == "constant") return lr;
  const std::int64_t decay_steps = std::max<std::int64_t>(1, max_steps - warmup_steps);
  const double p = std::clamp(static_cast<double>(step - warmup_steps) / decay_steps, 0.0, 1.0);
  if (kind == "linear") return min_lr + (lr - min_lr) * (1.0 - p);
  return min_lr + (lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * p));
}

}  // namespace memtrain::train
