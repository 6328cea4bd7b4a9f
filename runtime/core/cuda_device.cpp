#include "runtime/core/cuda_device.hpp"

#if MEMTRAIN_HAVE_CUDA
#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/ops/attention.hpp"
#include "kernels/ops/copy.hpp"
#include "kernels/ops/cross_entropy.hpp"
#include "kernels/ops/linear.hpp"
#include "kernels/ops/optimizer.hpp"
#include "memory/cuda_resource.hpp"
#include "memory/cuda_virtual_memory_resource.hpp"
#include "memory/out_of_memory.hpp"

namespace memtrain::core {

CudaWorkspaceSizes CudaWorkspaceSizes::for_batch(int B, int T, int NH, float attention_dropout, bool flash_attention,
                                                 std::int64_t max_tokens) {
  if (B < 1 || T < 1 || NH < 1) {
    throw std::invalid_argument("CudaWorkspaceSizes::for_batch: B = " + std::to_string(B) +
                                ", T = " + std::to_string(T) + ", NH = " + std::to_string(NH) + "; expected each >= 1");
  }
  const std::int64_t N = std::max(std::int64_t{B} * T, max_tokens);
  CudaWorkspaceSizes s;
  // The ops that use the fixed scratch say how much they need (Note [One op API over two
  // backends]); one op runs at a time on the stream, so the largest need serves them all.
  namespace ops = kernels::ops;
  constexpr auto gpu = kernels::Device::cuda;
  s.scratch =
      std::max({ops::reduction_workspace_bytes(gpu), ops::linear_bf16_workspace_bytes(gpu),
                ops::softmax_cross_entropy_workspace_bytes(gpu, static_cast<int>(N)),
                flash_attention ? std::size_t{0}
                                : ops::attention_workspace_bytes(gpu, B, T, NH, attention_dropout, sizeof(float))});
  // Each slot rounded up to 256 bytes, as ops::stage splits them.
  const std::size_t slot = (static_cast<std::size_t>(N) * 4 + 255) / 256 * 256;
  s.staging = slot * static_cast<std::size_t>(kernels::ops::StagingSlot::count);
  return s;
}

std::size_t CudaWorkspaceSizes::fixed_bytes() const { return kernels::gpu::kBlasWorkspaceBytes + scratch + staging; }

CudaDevice::CudaDevice(int device, CudaWorkspaceSizes sizes, bool allow_tf32) : device_(device), sizes_(sizes) {
  memory::check_cuda(cudaSetDevice(device), "cudaSetDevice");
  memory::check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  try {
    stream_id_ = streams_.add(stream_);
    blas_ = std::make_unique<kernels::gpu::CublasLtHandle>();
    memory::check_cuda(cudaMalloc(&blas_workspace_, kernels::gpu::kBlasWorkspaceBytes),
                       "cudaMalloc (cuBLASLt workspace)");
    memory::check_cuda(cudaMalloc(&scratch_, std::max<std::size_t>(sizes_.scratch, 1)), "cudaMalloc (scratch)");
    memory::check_cuda(cudaMalloc(&staging_, std::max<std::size_t>(sizes_.staging, 1)), "cudaMalloc (staging)");
  } catch (...) {
    cudaFree(staging_);
    cudaFree(scratch_);
    cudaFree(blas_workspace_);
    blas_.reset();
    cudaStreamDestroy(stream_);
    throw;
  }
  kc_.stream = stream_;
  kc_.blas = blas_->get();
  kc_.blas_workspace = blas_workspace_;
  kc_.blas_workspace_bytes = kernels::gpu::kBlasWorkspaceBytes;
  kc_.scratch = scratch_;
  kc_.scratch_bytes = sizes_.scratch;
  kc_.staging = staging_;
  kc_.staging_bytes = sizes_.staging;
  kc_.allow_tf32 = allow_tf32;
  const int dev = device_;
  cudaStream_t stream = stream_;
  views_ = std::make_shared<Workspace>(
      Workspace::Memory{[dev](std::size_t bytes) -> void* {
                          void* p = nullptr;
                          memory::check_cuda(cudaSetDevice(dev), "cudaSetDevice");
                          // cudaMalloc returns 256-byte aligned memory.
                          if (cudaMalloc(&p, bytes) != cudaSuccess) {
                            cudaGetLastError();  // a failed allocation's error is not sticky; clear it
                            throw OutOfMemory("cuda:" + std::to_string(dev) +
                                                  ": the float views' workspace (outside the "
                                                  "allocator) could not grow to " +
                                                  std::to_string(bytes) + " bytes",
                                              bytes);
                          }
                          return p;
                        },
                        // A growing slot's old buffer may still be read by kernels queued on the stream: they
                        // finish first.
                        [stream](void* p, std::size_t) {
                          cudaStreamSynchronize(stream);
                          cudaFree(p);
                        }});
}

CudaDevice::~CudaDevice() {
  // Destructors do not throw: work still queued is waited for and errors are dropped.
  cudaStreamSynchronize(stream_);
  views_.reset();  // contexts still holding it free it when they go
  cudaFree(staging_);
  cudaFree(scratch_);
  cudaFree(blas_workspace_);
  blas_.reset();
  cudaStreamDestroy(stream_);
}

std::shared_ptr<memory::CachingAllocator> CudaDevice::make_allocator(const memory::AllocatorOptions& options,
                                                                     const UpstreamWrap& wrap) {
  std::shared_ptr<memory::MemoryResource> upstream;
  if (memory::needs_virtual_memory(options)) {
    upstream = std::make_shared<memory::CudaVirtualMemoryResource>(device_);
  } else {
    upstream = std::make_shared<memory::CudaResource>(device_);
  }
  if (wrap) upstream = wrap(std::move(upstream));
  auto allocator = std::make_shared<memory::CachingAllocator>(std::move(upstream), options);
  allocator->set_stream_registry(&streams_);
  return allocator;
}

std::array<unsigned char, 16> CudaDevice::uuid_of(int device) {
  cudaDeviceProp prop{};
  memory::check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  std::array<unsigned char, 16> out{};
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<unsigned char>(prop.uuid.bytes[i]);
  return out;
}

void CudaDevice::attach(Context& ctx) const {
  ctx.set_op_context(op_context());
  ctx.set_stream(stream_id_);
  ctx.set_workspace(views_);
}

std::size_t CudaDevice::workspace_bytes() const { return sizes_.fixed_bytes() + views_->reserved_bytes(); }

CudaMemoryInfo CudaDevice::memory_info() const {
  CudaMemoryInfo info;
  cudaDeviceProp prop{};
  memory::check_cuda(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties");
  info.name = prop.name;
  memory::check_cuda(cudaSetDevice(device_), "cudaSetDevice");
  memory::check_cuda(cudaMemGetInfo(&info.free_bytes, &info.total_bytes), "cudaMemGetInfo");
  return info;
}

void CudaDevice::synchronize() const { memory::check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

}  // namespace memtrain::core
#endif  // MEMTRAIN_HAVE_CUDA
