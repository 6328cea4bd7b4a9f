#pragma once
// Which samples of the data stream each rank and micro-batch of a step takes.
#include <cstdint>

namespace memtrain::train {

// Note [The global batch does not depend on how it is split]
// global_batch_size = micro_batch_size x accumulation_steps x dp_size. Step s (0-based) uses
// samples [s * G, (s + 1) * G) of the stream; rank r takes the contiguous slice
// [s * G + r * G / dp, ...), cut into accumulation_steps micro-batches in order. The union of
// all micro-batches of a step is therefore the same set of samples for any dp and any
// micro_batch_size, and since masking and dropout are keyed by the global sample index, the
// same global batch; dividing the summed loss by the masked tokens of the whole global batch
// (all-reduced first) then makes the update independent of the split.
struct BatchPlan {
  int global_batch_size = 0;  // G
  int micro_batch_size = 0;
  int dp_size = 1;
  int rank = 0;

  // Checks that G is a positive multiple of micro_batch_size * dp_size. Throws
  // memtrain::ConfigError naming training.global_batch_size otherwise.
  static BatchPlan make(int global_batch_size, int micro_batch_size, int dp_size, int rank);

  int per_rank() const { return global_batch_size / dp_size; }
  int accumulation_steps() const { return per_rank() / micro_batch_size; }
  // Global index of the first sample of micro-batch `micro` (0-based) of step `step` (0-based).
  std::uint64_t first_sample(std::int64_t step, int micro) const {
    return static_cast<std::uint64_t>(step) * global_batch_size + static_cast<std::uint64_t>(rank) * per_rank() +
           static_cast<std::uint64_t>(micro) * micro_batch_size;
  }
};

}  // namespace memtrain::train
