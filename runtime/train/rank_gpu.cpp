#include "runtime/train/rank_gpu.hpp"

#if MEMTRAIN_HAVE_CUDA
#include <string>

#include "memory/cuda_resource.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::train {

int rank_gpu_index(const Config& config, int local_rank) {
  const int count = memory::cuda_device_count();
  const int index = config.device != "cuda" ? std::stoi(config.device.substr(5)) : count == 1 ? 0 : local_rank;
  if (index >= count) {
    throw ConfigError("device = " + config.device + ": this rank is local rank " + std::to_string(local_rank) +
                      " of its node and needs GPU " + std::to_string(index) + ", but " + std::to_string(count) +
                      " are visible; expected at most one rank per visible GPU on each node");
  }
  return index;
}

core::CudaWorkspaceSizes cuda_workspace_sizes(const Config& config) {
  return core::CudaWorkspaceSizes::for_batch(
      config.training.micro_batch_size, config.data.seq_length, config.model.num_attention_heads,
      config.model.attention_probs_dropout_prob, config.memory.attention == "flash",
      /*max_tokens=*/config.model.max_position_embeddings);
}

}  // namespace memtrain::train
#endif  // MEMTRAIN_HAVE_CUDA
