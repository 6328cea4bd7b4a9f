#pragma once
// The simulated device of a dry run or a plan (`--target`): how many bytes the allocator may
// take, and what the device loses to memory that is not the allocator's (issue 4, "Dry run").
#include <cstddef>
#include <optional>
#include <string>

#include "runtime/config/config.hpp"

namespace memtrain::train {

// Memory a process holds on the device outside the caching allocator, in bytes.
struct NonAllocatorBytes {
  std::size_t cuda_context = 0;      // driver context + loaded kernel images
  std::size_t cublas_workspace = 0;  // cuBLAS workspace per stream (one stream)
  std::size_t cudnn_workspace = 0;   // memtrain calls no cuDNN kernel: 0 unless overridden
  std::size_t nccl_buffers = 0;      // NCCL channel buffers (only with more than one rank)
  // On a CPU-sized target (NGiB): the communication buffers of the data-parallel sum (memtrain
  // all-reduces the gradients in place, so this is 0 today).
  std::size_t communication_buffers = 0;
  // --non-allocator: replaces the sum of the estimates above.
  std::optional<std::size_t> override_total;
  std::size_t total() const {
    if (override_total) return *override_total;
    return cuda_context + cublas_workspace + cudnn_workspace + nccl_buffers + communication_buffers;
  }
};

struct DeviceTarget {
  std::string name;                // "a100-40gb", or the size as given ("24GiB")
  std::size_t capacity_bytes = 0;  // the device's memory as nvidia-smi's memory.total shows it
  NonAllocatorBytes non_allocator;
  // Bytes the allocator may reserve: capacity minus the non-allocator memory (0 when that
  // alone does not fit).
  std::size_t allocator_capacity() const {
    const std::size_t device = capacity_bytes > non_allocator.total() ? capacity_bytes - non_allocator.total() : 0;
    return allocator_limit != 0 && allocator_limit < device ? allocator_limit : device;
  }
  // memory.limit / memory.capacity of the config planned (the smaller set one; 0 = none): the
  // allocator never reserves past it, on any device (the dry run's allocator obeys the same).
  std::size_t allocator_limit = 0;
  std::string allocator_limit_key;  // "memory.limit" or "memory.capacity", for reports
  // This target with the allocator capped by `memory` (its limit and capacity, as above).
  DeviceTarget limited_by(const MemoryConfig& memory) const;
  // Sets --non-allocator: `bytes` replace the estimate. Throws ConfigError naming `option`
  // when they are not smaller than the device (nothing would be left for the allocator).
  void override_non_allocator(std::size_t bytes, const std::string& option = "--non-allocator");
  // "a100-40gb (40.00 GiB)" for messages.
  std::string describe() const;
  // NCCL's buffers exist only with more than one rank: this target for a world of `world_size`.
  DeviceTarget for_world_size(int world_size) const;

  std::size_t nccl_bytes_when_distributed = 0;
};

// Note [Target capacities and what is not the allocator's]
// Capacities are nvidia-smi's memory.total for each board (NVIDIA data sheets; what
// torch.cuda.get_device_properties().total_memory reports): A100-SXM4-40GB 40960 MiB,
// A100-SXM4-80GB 81920 MiB, H100 80GB HBM3 (SXM5) 81559 MiB, H200 143771 MiB.
// Memory outside the allocator, per GPU target (estimates; --non-allocator overrides the sum):
// - CUDA context: PyTorch's "Understanding CUDA memory usage" notes that the context takes
//   memory no allocator statistic shows; with CUDA >= 11.7 lazy module loading it is a few
//   hundred MiB on these boards. We charge 512 MiB on A100 and 640 MiB on H100/H200 (more
//   SMs, larger per-SM local-memory reservation).
// - cuBLAS workspace: the cuBLAS documentation (cublasSetWorkspace) recommends 4 MiB on
//   Ampere and 32 MiB on Hopper; PyTorch's default CUBLAS_WORKSPACE_CONFIG follows it.
// - cuDNN workspace: 0; memtrain calls no cuDNN kernel.
// - NCCL buffers, only when world_size > 1: NCCL_BUFFSIZE (4 MiB default, NCCL environment
//   documentation) for each of the send and receive sides of each channel; we assume 16
//   channels on A100 (NVLink3) and 32 on H100/H200 (NVLink4), so 128 MiB and 256 MiB.
// Measured once on an H200 (driver 580.159, CUDA 13.0; benchmarks/gpu_memory_overheads,
// README "GPU (CUDA)"): context 527 MiB after cudaFree(0), so the 640 MiB charged is on the safe
// side; the cuBLASLt workspace is the 32 MiB asked for; and NCCL 2.28 took 578 MiB for a world
// of ONE rank, more than the 256 MiB charged above one rank. That figure stays until several
// GPUs can be measured.
// An "NGiB" target is a plain simulated device (CPU planning): no context, no cuBLAS/NCCL;
// the data-parallel gradient sum runs in place, so no communication buffer is charged.

// Parses --target: a100-40gb | a100-80gb | h100-80gb | h200-141gb | a size ("24GiB", "512MiB",
// bytes). world_size > 1 adds the NCCL buffers to a GPU target. Throws ConfigError naming
// `option` ("--target") and the accepted names for an unknown name or a zero size, and the
// size parser's reason for a size it rejects (too large for 64 bits, an unknown unit).
DeviceTarget parse_device_target(const std::string& text, int world_size = 1, const std::string& option = "--target");

// "a100-40gb, a100-80gb, h100-80gb, h200-141gb or a size such as 24GiB", for messages.
std::string device_target_names();

// The plan target of a real GPU, from its name as cudaGetDeviceProperties gives it ("NVIDIA
// H200", "NVIDIA A100-SXM4-40GB") and its memory in bytes: the known board of that family whose
// capacity is nearest, so that a GPU run can print plan's estimate of the memory outside the
// allocator beside what it measures. Empty for a GPU of no known family.
std::optional<DeviceTarget> device_target_for_gpu(const std::string& gpu_name, std::size_t total_bytes);

// Note [What a GPU job needs outside the allocator]
// A job admitted by plan (memory.admission: wait) reserves, on a GPU, what its process will hold
// there and no allocator statistic shows: the CUDA context (the board's estimate above; for a GPU
// of no known family the largest estimate, so that an unknown board is not under-reserved),
// memtrain's own fixed workspaces, which CudaDevice cudaMallocs beside the allocator (the cuBLASLt
// workspace, the kernels' scratch and the batch's staging slots, sized by
// CudaWorkspaceSizes::for_batch for the configured micro-batch, the largest the job runs, and
// kept when it shrinks), and NCCL's buffers with more than one rank. The figure replaces the
// board's cuBLAS estimate by memtrain's own workspace, which contains it. What this leaves out is
// the float views' scratch of a 16-bit run, which grows by cudaMalloc to its high-water mark: the
// job's reservation follows what it holds at every step boundary (Note [A footprint's slack],
// runtime/train/pool_seat.hpp), which counts that scratch as it grows.

// What one training process of `world_size` on the GPU named `gpu_name` (cudaDeviceProp::name)
// with `total_bytes` of memory holds outside its caching allocator, in bytes: the context, the
// fixed workspaces `fixed_workspace_bytes` (in cublas_workspace) and NCCL's buffers when
// world_size > 1 (Note [What a GPU job needs outside the allocator]).
NonAllocatorBytes training_non_allocator_bytes(const std::string& gpu_name, std::size_t total_bytes, int world_size,
                                               std::size_t fixed_workspace_bytes);

}  // namespace memtrain::train
