#include "runtime/train/pool_device.hpp"

#include <algorithm>

#include "runtime/config/device_target.hpp"
#include "runtime/core/errors.hpp"

#if MEMTRAIN_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "memory/cuda_error.hpp"
#include "runtime/train/model_memory.hpp"
#include "runtime/train/rank_gpu.hpp"
#endif

namespace memtrain::train {

PoolDevice pool_device(const Config& config, int local_rank, int local_size, int world_size) {
  PoolDevice d;
  if (config.device == "cpu") {
    d.ledger = config.memory.ledger;
    d.processes = std::max(1, local_size);
    return d;
  }
  if (world_size > 1) {
    throw ConfigError("memory.admission = wait with device = " + config.device + ": this job has " +
                      std::to_string(world_size) +
                      " ranks, each on a GPU of its own, and a GPU is a pool of its own (Note [A GPU is a pool of "
                      "its own], runtime/train/pool_device.hpp); admission by plan on GPUs takes a job of one rank "
                      "so far; expected one rank, memory.admission: fail, or device: cpu");
  }
#if MEMTRAIN_HAVE_CUDA
  const int index = rank_gpu_index(config, local_rank);
  cudaDeviceProp prop{};
  memory::check_cuda(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
  d.ledger = gpu_ledger_name(config.memory, core::CudaDevice::uuid_of(index));
  d.fixed_workspace_bytes = cuda_workspace_sizes(config).fixed_bytes();
  const NonAllocatorBytes outside =
      training_non_allocator_bytes(prop.name, prop.totalGlobalMem, world_size, d.fixed_workspace_bytes);
  d.context_bytes = outside.total() - d.fixed_workspace_bytes;
  d.processes = 1;
  d.gpu = true;
  return d;
#else
  (void)local_rank;
  throw ConfigError("device = " + config.device +
                    ": this memtrain was built without the CUDA backend; expected device: cpu, or a build with nvcc");
#endif
}

std::size_t pool_held_bytes(std::size_t reserved_bytes, std::size_t workspace_bytes, const PoolDevice& device) {
  return (reserved_bytes + device.context_bytes + workspace_bytes) *
         static_cast<std::size_t>(std::max(1, device.processes));
}

std::size_t pool_need_bytes(std::size_t planned_bytes, const PoolDevice& device) {
  return (planned_bytes + device.outside_allocator_bytes()) * static_cast<std::size_t>(std::max(1, device.processes));
}

}  // namespace memtrain::train
