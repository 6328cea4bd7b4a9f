#pragma once
// The pool a job admitted by plan (memory.admission: wait) waits in, and what each of its
// processes holds there beside the caching allocator (Note [What a GPU job needs outside the
// allocator], runtime/config/device_target.hpp).
#include <cstddef>
#include <string>

#include "runtime/config/config.hpp"

namespace memtrain::train {

// Note [A GPU is a pool of its own]
// The allocator of a `device: cuda` job takes its memory through the ledger of its GPU (Note
// [One ledger per GPU], model_memory.cpp), so the queue it waits in is that ledger's: a job that
// queued on memory.ledger would reserve in one pool and allocate in another. A job of several
// ranks has a GPU, and so a pool, per rank; admitting it would mean holding a reservation on
// some GPUs while waiting for others (gang scheduling across pools, which can deadlock two jobs
// that each hold one GPU). That is not built: on GPUs, admission by plan takes jobs of one rank.
struct PoolDevice {
  std::string ledger;  // the pool's ledger: memory.ledger on the host, the GPU's own on a GPU
  // What one process holds outside its allocator, in bytes: 0 on the host; on a GPU the CUDA
  // context (and NCCL's buffers) in context_bytes, memtrain's fixed workspaces in
  // fixed_workspace_bytes.
  std::size_t context_bytes = 0;
  std::size_t fixed_workspace_bytes = 0;
  int processes = 1;  // the job's processes in this pool: its ranks on the host, 1 on a GPU
  bool gpu = false;
  std::size_t outside_allocator_bytes() const { return context_bytes + fixed_workspace_bytes; }
};

// The pool of the rank that is local rank `local_rank` of `local_size` on its node, in a job of
// `world_size` ranks. On the host: memory.ledger, nothing outside the allocator, local_size
// processes. On a GPU: the GPU's ledger (gpu_ledger_name of the rank's GPU) and
// training_non_allocator_bytes for its name, memory and the config's fixed workspaces.
// Throws ConfigError for a GPU job of more than one rank (Note [A GPU is a pool of its own]) and
// for a GPU that is not visible or a build without the CUDA backend; memory::CudaError when the
// GPU cannot be queried.
PoolDevice pool_device(const Config& config, int local_rank, int local_size, int world_size);

// A job's need in its pool, in bytes: (the planner's peak reserved bytes of one process,
// `planned_bytes`, plus what it holds outside the allocator) times its processes in the pool.
std::size_t pool_need_bytes(std::size_t planned_bytes, const PoolDevice& device);

// What a running job holds in its pool, in bytes, in the need's terms: (one process's allocator
// reserved bytes, plus its context and its workspaces as they are now, `workspace_bytes`, which
// grow with a 16-bit run's float-view scratch) times its processes in the pool. At the planned
// peak with the fixed workspaces it equals pool_need_bytes of that peak.
std::size_t pool_held_bytes(std::size_t reserved_bytes, std::size_t workspace_bytes, const PoolDevice& device);

}  // namespace memtrain::train
