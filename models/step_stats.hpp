#pragma once
// What one micro-batch contributes to a step's logged numbers. Sums, not means, so that the
// trainer can add micro-batches and ranks before dividing by the global count.
#include <cstdint>

namespace memtrain::models {

struct StepStats {
  double loss_sum = 0;           // sum over masked tokens of -log p(label), nats
  std::int64_t num_masked = 0;   // masked tokens in the micro-batch
  std::int64_t num_correct = 0;  // masked tokens whose arg-max prediction is the label
  // Wall seconds (steady_clock) of forward_backward's forward pass (through the loss) and of
  // its backward pass, for metrics.jsonl's time_forward_s / time_backward_s. Always measured by
  // forward_backward; 0 from evaluate and for a micro-batch without masked tokens (no pass).
  double forward_s = 0;
  double backward_s = 0;
};

}  // namespace memtrain::models
