#include "kernels/cpu/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace memtrain::kernels {

double learning_rate(int step, int max_steps, int warmup_steps, double lr, double min_lr, const std::string& schedule) {
  if (schedule != "cosine" && schedule != "linear" && schedule != "constant") {
    throw std::invalid_argument("learning_rate: schedule = \"" + schedule + "\"; expected cosine, linear or constant");
  }
  if (step < 0 || max_steps < 0 || warmup_steps < 0) {
    throw std::invalid_argument("learning_rate: step = " + std::to_string(step) +
                                ", max_steps = " + std::to_string(max_steps) +
                                ", warmup_steps = " + std::to_string(warmup_steps) + "; expected non-negative counts");
  }
  if (min_lr > lr) {
    throw std::invalid_argument("learning_rate: min_lr = " + std::to_string(min_lr) +
                                " exceeds lr = " + std::to_string(lr));
  }
  if (warmup_steps > 0 && step <= warmup_steps) {
    return lr * static_cast<double>(step) / warmup_steps;
  }
  if (schedule == "constant") return lr;
  const int decay_steps = max_steps - warmup_steps;
  if (decay_steps <= 0) return min_lr;  // warmup covers the whole run: it ends at lr, then min
  const double r = std::clamp(static_cast<double>(step - warmup_steps) / decay_steps, 0.0, 1.0);
  const double coeff = schedule == "cosine" ? 0.5 * (1.0 + std::cos(std::numbers::pi * r)) : 1.0 - r;
  return min_lr + (lr - min_lr) * coeff;
}

}  // namespace memtrain::kernels
