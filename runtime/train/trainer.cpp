#include "runtime/train/trainer.hpp"

#include "memory/out_of_memory.hpp"
#include "runtime/train/model_memory.hpp"
#include "runtime/train/training_run.hpp"

namespace memtrain::train {

int run_training(const Config& config, const RunOptions& options) {
  try {
    TrainingRun run(config, options);
    return run.run();
  } catch (const OutOfMemory& e) {
    // A job under memory.limit or memory.reservation: the message says which limit it met.
    const std::string limit = memory_limit_context(config.memory);
    if (limit.empty()) throw;
    throw OutOfMemory(e.what() + limit, e.requested_bytes());
  }
}

}  // namespace memtrain::train
