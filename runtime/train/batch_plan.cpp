#include "runtime/train/batch_plan.hpp"

#include <string>

#include "runtime/core/errors.hpp"

namespace memtrain::train {

BatchPlan BatchPlan::make(int global_batch_size, int micro_batch_size, int dp_size, int rank) {
  if (micro_batch_size <= 0 || dp_size <= 0 || global_batch_size <= 0 ||
      global_batch_size % (micro_batch_size * dp_size) != 0) {
    throw ConfigError("training.global_batch_size = " + std::to_string(global_batch_size) +
                      " is not a positive multiple of training.micro_batch_size (" + std::to_string(micro_batch_size) +
                      ") x data-parallel ranks (" + std::to_string(dp_size) + ")");
  }
  return BatchPlan{global_batch_size, micro_batch_size, dp_size, rank};
}

}  // namespace memtrain::train
