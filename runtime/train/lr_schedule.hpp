#pragma once
// The learning rate of each step: linear warmup, then linear or cosine decay to min_lr, or
// constant (training.lr_schedule; the shapes of Hugging Face's get_linear_schedule_with_warmup
// and get_cosine_schedule_with_warmup, with a floor min_lr as Megatron-LM's OptimizerParamScheduler).
#include <cstdint>
#include <string>

namespace memtrain::train {

struct LrSchedule {
  double lr = 1e-4;          // peak learning rate, reached at the end of warmup
  double min_lr = 0.0;       // floor reached at max_steps (linear, cosine)
  std::int64_t warmup_steps = 0;
  std::int64_t max_steps = 1;
  std::string kind = "linear";  // linear | cosine | constant

  // Learning rate of step `step` (1-based: the first update is step 1).
  //   warmup (step <= warmup_steps): lr * step / warmup_steps
  //   then with p = (step - warmup_steps) / (max_steps - warmup_steps) in [0, 1]:
  //   linear:   min_lr + (lr - min_lr) * (1 - p)
  //   cosine:   min_lr + (lr - min_lr) * 0.5 * (1 + cos(pi p))
  //   constant: lr
  // Throws memtrain::ConfigError for an unknown kind.
  double at(std::int64_t step) const;
};

}  // namespace memtrain::train
