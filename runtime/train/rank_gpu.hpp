#pragma once
// The GPU a rank of a `device: cuda` job trains on, and the fixed workspaces memtrain allocates
// there beside the caching allocator. Compiled only when nvcc was found.
#if MEMTRAIN_HAVE_CUDA
#include "runtime/config/config.hpp"
#include "runtime/core/cuda_device.hpp"

namespace memtrain::train {

// The CUDA device index of the rank that is local rank `local_rank` of its node: `cuda` takes the
// local rank (CUDA_VISIBLE_DEVICES narrows what that indexes; a rank that sees one GPU takes it,
// as Slurm's --gpus-per-task=1 arranges), `cuda:N` device N. Throws ConfigError when that GPU is
// not visible, memory::CudaError when the runtime cannot count GPUs (no driver: its reason).
int rank_gpu_index(const Config& config, int local_rank);

// The fixed workspaces CudaDevice allocates for this config (Note [Fixed workspaces],
// kernels/cuda/cublaslt_handle.hpp): for training micro-batches of training.micro_batch_size
// sequences of data.seq_length tokens, and fill-mask prompts up to max_position_embeddings
// tokens. Throws std::invalid_argument as CudaWorkspaceSizes::for_batch.
core::CudaWorkspaceSizes cuda_workspace_sizes(const Config& config);

}  // namespace memtrain::train
#endif  // MEMTRAIN_HAVE_CUDA
