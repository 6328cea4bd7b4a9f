#pragma once
// One GPU as an execution context: the compute stream, the cuBLASLt handle, the fixed device
// workspaces the kernels use, and a caching allocator over the GPU's memory on that stream
// (docs/cuda-backend.md, "What GPU training still needs"). Compiled only when nvcc was found.
#if MEMTRAIN_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <cstddef>
#include <array>
#include <functional>
#include <memory>
#include <string>

#include "kernels/cuda/cublaslt_handle.hpp"
#include "kernels/cuda/kernel_context.hpp"
#include "kernels/op_context.hpp"
#include "memory/allocator_options.hpp"
#include "memory/caching_allocator.hpp"
#include "memory/cuda_stream_registry.hpp"
#include "runtime/core/context.hpp"
#include "runtime/core/workspace.hpp"

namespace memtrain::core {

// The sizes of the device workspaces a CudaDevice allocates up front (Note [Fixed workspaces],
// kernels/cuda/cublaslt_handle.hpp), in bytes.
struct CudaWorkspaceSizes {
  std::size_t scratch = 0;  // reductions, cross-entropy rows, unfused attention's fp32 scores
  std::size_t staging = 0;  // the batch's index arrays (Note [Index arrays travel through fixed slots])

  // What a training micro-batch of B sequences of T tokens needs, with NH attention heads and
  // attention dropout p, and evaluation passes of up to max_tokens tokens (fill-mask prompts:
  // no dropout): the largest of the global norm's reduction, the bf16 linears' weight-gradient
  // blocks (8 MiB), the cross-entropy of every token
  // masked, and, for unfused attention with dropout, its dropped probabilities [B, NH, T, T] in
  // fp32 (kernels/cuda/attention.cu; the kernels see float: 16-bit storage goes through float
  // views); six staging slots of as many four-byte values as tokens. Flash attention takes no
  // scratch. Throws std::invalid_argument for B, T or NH < 1.
  static CudaWorkspaceSizes for_batch(int B, int T, int NH, float attention_dropout, bool flash_attention,
                                      std::int64_t max_tokens = 0);
  // Bytes a CudaDevice allocates up front with these sizes: the cuBLASLt workspace
  // (kBlasWorkspaceBytes), scratch and staging.
  std::size_t fixed_bytes() const;
};

// What cudaMemGetInfo and cudaGetDeviceProperties say about a device.
struct CudaMemoryInfo {
  std::string name;             // "NVIDIA H200"
  std::size_t total_bytes = 0;  // the device's memory
  std::size_t free_bytes = 0;   // not in use by any process now
};

// Owns, on CUDA device `device`: a non-blocking compute stream, registered with its own
// CudaStreamRegistry; a cuBLASLt handle; cudaMalloc'd blas workspace (kBlasWorkspaceBytes),
// scratch and staging of the given sizes; and the KernelContext naming them. attach() points a
// Context at it: ops run there and tensors are allocated on its stream. The allocator from
// make_allocator() serves device memory through CudaResource (or CudaVirtualMemoryResource
// for vmm_stitch and expandable segments) with this device's streams and events.
//
// Throws memory::CudaError when the device cannot be used (no driver: the CUDA runtime's
// reason) or a workspace cannot be allocated. The device must outlive every Context attached
// to it and every tensor of those contexts (their storage returns to its allocator). Not
// copyable or movable: contexts hold pointers into it.
class CudaDevice {
 public:
  CudaDevice(int device, CudaWorkspaceSizes sizes, bool allow_tf32);
  ~CudaDevice();
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  int device() const { return device_; }
  const kernels::gpu::KernelContext& kernel_context() const { return kc_; }
  kernels::OpContext op_context() const { return kernels::OpContext{kernels::Device::cuda, &kc_}; }
  memory::StreamId stream_id() const { return stream_id_; }

  // A caching allocator over this GPU's memory, with `options` (memory.policy and friends).
  // `wrap`, when set, is given the device resource and returns the allocator's upstream (a
  // quota over the GPU's shared ledger). Throws std::invalid_argument for options the
  // allocator rejects, and what `wrap` throws.
  using UpstreamWrap = std::function<std::shared_ptr<memory::MemoryResource>(std::shared_ptr<memory::MemoryResource>)>;
  std::shared_ptr<memory::CachingAllocator> make_allocator(const memory::AllocatorOptions& options,
                                                           const UpstreamWrap& wrap = {});

  // The GPU's UUID (cudaDeviceProp::uuid), stable across CUDA_VISIBLE_DEVICES renumbering.
  std::array<unsigned char, 16> uuid() const { return uuid_of(device_); }
  // The UUID of CUDA device `device`, before any CudaDevice is made on it. Throws
  // memory::CudaError.
  static std::array<unsigned char, 16> uuid_of(int device);

  // ctx's ops run on this device's kernels, its new tensors are allocated on its stream, and its
  // workspace (the float views' scratch) is this device's. ctx's allocator should come from
  // make_allocator().
  void attach(Context& ctx) const;

  // Bytes of device memory held outside the allocator: the three fixed workspaces, and the
  // float views' scratch at its high-water mark so far.
  std::size_t workspace_bytes() const;

  // The device's name and memory as the driver sees it now. Throws memory::CudaError.
  CudaMemoryInfo memory_info() const;

  // Waits for the compute stream.
  void synchronize() const;

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
  memory::CudaStreamRegistry streams_;
  memory::StreamId stream_id_ = memory::kDefaultStream;
  std::unique_ptr<kernels::gpu::CublasLtHandle> blas_;
  void* blas_workspace_ = nullptr;
  void* scratch_ = nullptr;
  void* staging_ = nullptr;
  CudaWorkspaceSizes sizes_;
  kernels::gpu::KernelContext kc_;
  // Device scratch of the float views, grown by cudaMalloc (Note [Float views convert on the
  // tensor's device]); shared with the attached contexts.
  std::shared_ptr<Workspace> views_;
};

}  // namespace memtrain::core
#endif  // MEMTRAIN_HAVE_CUDA
