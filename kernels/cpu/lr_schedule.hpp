#pragma once
#include <string>

namespace memtrain::kernels {

// Learning rate for the update numbered `step` (1-based: the first optimizer step is 1), as in
// Megatron-LM's AnnealingLR and Hugging Face's get_{cosine,linear}_schedule_with_warmup:
// - warmup, step <= warmup_steps: lr * step / warmup_steps (linear from 0);
// - then, with r = (step - warmup_steps) / (max_steps - warmup_steps) clamped to [0, 1]:
//   "cosine":   min_lr + (lr - min_lr) * 0.5 * (1 + cos(pi * r))
//   "linear":   min_lr + (lr - min_lr) * (1 - r)
//   "constant": lr
// Steps past max_steps stay at min_lr (constant: lr). step 0 gives 0 when warmup_steps > 0.
// Throws std::invalid_argument for an unknown schedule name, negative step counts, or
// min_lr > lr.
double learning_rate(int step, int max_steps, int warmup_steps, double lr, double min_lr, const std::string& schedule);

}  // namespace memtrain::kernels
