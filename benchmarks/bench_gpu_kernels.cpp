// The CUDA kernels (issue 14) at BERT-Large's shapes: micro-batch 8 x sequence 512 = 4096
// tokens, hidden 1024, FFN 4096, 16 heads; bf16 storage with fp32 accumulation, and fp32 with
// TF32 for one GEMM. Each iteration is timed on the GPU with CUDA events (manual time), so
// launch overhead on the host does not count twice. Counters: model FLOP/s of the op (2 per
// multiply-add; attention's four GEMMs as counted by the model FLOPs of runtime/train) and the
// bytes the op must move at least (bytes_per_second). Without a GPU every case stops with
// "no CUDA device: <reason>". Built only with CUDA; see README "GPU (CUDA)".
#include <benchmark/benchmark.h>

#if MEMTRAIN_HAVE_CUDA
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/cuda/adamw.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/cublaslt_handle.hpp"
#include "kernels/cuda/flash_attention.hpp"
#include "kernels/cuda/gelu.hpp"
#include "kernels/cuda/layernorm.hpp"
#include "kernels/cuda/linear.hpp"
#include "memory/cuda_resource.hpp"

namespace memtrain::bench {
namespace {

using kernels::gpu::KernelContext;
using bf16 = __nv_bfloat16;

constexpr int kB = 8, kT = 512, kC = 1024, kFF = 4096, kNH = 16;
constexpr int kN = kB * kT;

// Device buffers filled with small values (0.01 in every element's bits pattern, not zeros:
// zeros let some tensor-core paths run faster than real data).
void* device_alloc(std::size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;
  cudaMemset(p, 0x3c, bytes);  // 0x3c3c: about 0.0115 in bf16, 0.0115 in fp32's high half
  return p;
}

struct Gpu {
  cudaStream_t stream = nullptr;
  std::unique_ptr<kernels::gpu::CublasLtHandle> handle;
  KernelContext ctx;
  cudaEvent_t start = nullptr, stop = nullptr;

  bool open(benchmark::State& state) {
    if (memory::cuda_device_count() == 0) {
      state.SkipWithError(("no CUDA device: " + memory::cuda_unavailable_reason()).c_str());
      return false;
    }
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    handle = std::make_unique<kernels::gpu::CublasLtHandle>();
    ctx.stream = stream;
    ctx.blas = handle->get();
    ctx.blas_workspace = device_alloc(kernels::gpu::kBlasWorkspaceBytes);
    ctx.blas_workspace_bytes = kernels::gpu::kBlasWorkspaceBytes;
    ctx.scratch_bytes = kernels::gpu::attention_scratch_bytes(kB, kT, kNH, 0.1f, 2) + (1 << 20);
    ctx.scratch = device_alloc(ctx.scratch_bytes);
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    return true;
  }
  template <class F>
  void run(benchmark::State& state, F&& op) {
    op();  // warm-up: cuBLASLt heuristics, lazy module loading
    cudaStreamSynchronize(stream);
    for (auto _ : state) {
      cudaEventRecord(start, stream);
      op();
      cudaEventRecord(stop, stream);
      cudaEventSynchronize(stop);
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      state.SetIterationTime(ms / 1e3);
    }
  }
  ~Gpu() {
    if (stream == nullptr) return;
    cudaFree(ctx.blas_workspace);
    cudaFree(ctx.scratch);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    handle.reset();
    cudaStreamDestroy(stream);
  }
};

void flops(benchmark::State& state, double per_iteration) {
  state.counters["TFLOP/s"] =
      benchmark::Counter(per_iteration * state.iterations() / 1e12, benchmark::Counter::kIsRate);
}

// One linear layer, forward or forward + backward: [N, in] -> [N, out].
template <class T>
void BM_Linear(benchmark::State& state, int in, int out, bool backward, bool tf32) {
  Gpu g;
  if (!g.open(state)) return;
  g.ctx.allow_tf32 = tf32;
  auto* x = static_cast<T*>(device_alloc(sizeof(T) * kN * in));
  auto* w = static_cast<T*>(device_alloc(sizeof(T) * in * out));
  auto* b = static_cast<T*>(device_alloc(sizeof(T) * out));
  auto* y = static_cast<T*>(device_alloc(sizeof(T) * kN * out));
  auto* dx = static_cast<T*>(device_alloc(sizeof(T) * kN * in));
  auto* dw = static_cast<T*>(device_alloc(sizeof(T) * in * out));
  auto* db = static_cast<T*>(device_alloc(sizeof(T) * out));
  g.run(state, [&] {
    kernels::gpu::linear_forward<T>(g.ctx, y, x, w, b, kN, in, out);
    if (backward) kernels::gpu::linear_backward<T>(g.ctx, dx, dw, db, y, x, w, kN, in, out);
  });
  flops(state, 2.0 * kN * in * out * (backward ? 3 : 1));
  for (void* p : {(void*)x, (void*)w, (void*)b, (void*)y, (void*)dx, (void*)dw, (void*)db}) cudaFree(p);
}

void BM_LinearBf16(benchmark::State& state, int in, int out, bool backward) {
  BM_Linear<bf16>(state, in, out, backward, false);
}
void BM_LinearFp32(benchmark::State& state, int in, int out, bool backward, bool tf32) {
  BM_Linear<float>(state, in, out, backward, tf32);
}

void BM_AttentionBf16(benchmark::State& state, bool backward) {
  Gpu g;
  if (!g.open(state)) return;
  const std::size_t n = std::size_t(kN) * kC, np = std::size_t(kB) * kNH * kT * kT;
  auto* q = static_cast<bf16*>(device_alloc(2 * n));
  auto* out = static_cast<bf16*>(device_alloc(2 * n));
  auto* probs = static_cast<bf16*>(device_alloc(2 * np));
  auto* scratch = static_cast<bf16*>(device_alloc(2 * np));
  auto* dq = static_cast<bf16*>(device_alloc(2 * n));
  const kernels::RngKey key{1, 1, 0, 0, 0};
  g.run(state, [&] {
    kernels::gpu::attention_forward<bf16>(g.ctx, out, probs, q, q, q, nullptr, kB, kT, kC, kNH, 0.1f, key, 0);
    if (backward) {
      kernels::gpu::attention_backward<bf16>(g.ctx, dq, dq, dq, scratch, out, probs, q, q, q, kB, kT, kC, kNH, 0.1f,
                                             key, 0);
    }
  });
  // Q K^T and P V: 2 GEMMs of B NH T T HS multiply-adds forward, 4 more backward.
  flops(state, 2.0 * 2 * kB * kNH * double(kT) * kT * (kC / kNH) * (backward ? 3 : 1));
  for (void* p : {(void*)q, (void*)out, (void*)probs, (void*)scratch, (void*)dq}) cudaFree(p);
}

void BM_FlashAttentionBf16(benchmark::State& state, bool backward) {
  Gpu g;
  if (!g.open(state)) return;
  const std::size_t n = std::size_t(kN) * kC;
  auto* q = static_cast<bf16*>(device_alloc(2 * n));
  auto* out = static_cast<bf16*>(device_alloc(2 * n));
  auto* dq = static_cast<bf16*>(device_alloc(2 * n));
  auto* lse = static_cast<float*>(device_alloc(4 * std::size_t(kB) * kNH * kT));
  const kernels::RngKey key{1, 1, 0, 0, 0};
  g.run(state, [&] {
    kernels::gpu::flash_attention_forward<bf16>(g.ctx, out, lse, q, q, q, nullptr, kB, kT, kC, kNH, 0.1f, key, 0);
    if (backward) {
      kernels::gpu::flash_attention_backward<bf16>(g.ctx, dq, dq, dq, out, out, lse, q, q, q, nullptr, kB, kT, kC, kNH,
                                                   0.1f, key, 0);
    }
  });
  flops(state, 2.0 * 2 * kB * kNH * double(kT) * kT * (kC / kNH) * (backward ? 3 : 1));
  for (void* p : {(void*)q, (void*)out, (void*)dq, (void*)lse}) cudaFree(p);
}

void BM_LayerNormBf16(benchmark::State& state) {
  Gpu g;
  if (!g.open(state)) return;
  auto* x = static_cast<bf16*>(device_alloc(2 * std::size_t(kN) * kC));
  auto* y = static_cast<bf16*>(device_alloc(2 * std::size_t(kN) * kC));
  auto* gamma = static_cast<bf16*>(device_alloc(2 * kC));
  auto* stats = static_cast<float*>(device_alloc(8 * kN));
  g.run(state,
        [&] { kernels::gpu::layernorm_forward<bf16>(g.ctx, y, stats, stats + kN, x, gamma, gamma, kN, kC, 1e-12f); });
  state.SetBytesProcessed(state.iterations() * 2 * 2 * std::int64_t(kN) * kC);
  for (void* p : {(void*)x, (void*)y, (void*)gamma, (void*)stats}) cudaFree(p);
}

void BM_BiasGeluBf16(benchmark::State& state) {
  Gpu g;
  if (!g.open(state)) return;
  auto* x = static_cast<bf16*>(device_alloc(2 * std::size_t(kN) * kFF));
  auto* b = static_cast<bf16*>(device_alloc(2 * kFF));
  g.run(state, [&] { kernels::gpu::bias_gelu_forward<bf16>(g.ctx, x, x, b, kN, kFF); });
  state.SetBytesProcessed(state.iterations() * 2 * 2 * std::int64_t(kN) * kFF);
  cudaFree(x);
  cudaFree(b);
}

// AdamW over BERT-Large's 335 M parameters in bf16 with fp32 masters and moments: reads grad (2
// bytes), master, m, v (12) and writes master, m, v, value (14): 28 bytes a parameter.
void BM_AdamWBf16(benchmark::State& state) {
  Gpu g;
  if (!g.open(state)) return;
  const std::int64_t n = 335'141'888;
  auto* master = static_cast<float*>(device_alloc(4 * n));
  auto* m = static_cast<float*>(device_alloc(4 * n));
  auto* v = static_cast<float*>(device_alloc(4 * n));
  auto* value = static_cast<bf16*>(device_alloc(2 * n));
  auto* grad = static_cast<bf16*>(device_alloc(2 * n));
  g.run(state, [&] {
    kernels::gpu::adamw_update_bf16(g.ctx, master, value, grad, m, v, n, 1e-4f, 0.9f, 0.999f, 1e-6f, 0.01f, 10, 1.0f);
  });
  state.SetBytesProcessed(state.iterations() * 28 * n);
  for (void* p : {(void*)master, (void*)m, (void*)v, (void*)value, (void*)grad}) cudaFree(p);
}

BENCHMARK_CAPTURE(BM_LinearBf16, qkv_fwd_bf16, kC, 3 * kC, false)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_LinearBf16, ffn_up_fwd_bwd_bf16, kC, kFF, true)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_LinearBf16, ffn_down_fwd_bwd_bf16, kFF, kC, true)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_LinearFp32, ffn_up_fwd_bwd_tf32, kC, kFF, true, true)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_LinearFp32, ffn_up_fwd_bwd_fp32, kC, kFF, true, false)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_AttentionBf16, fwd, false)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_AttentionBf16, fwd_bwd, true)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_FlashAttentionBf16, fwd, false)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_FlashAttentionBf16, fwd_bwd, true)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LayerNormBf16)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BiasGeluBf16)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AdamWBf16)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace memtrain::bench

BENCHMARK_MAIN();
#else
#include <cstdio>
int main() {
  std::puts("bench_gpu_kernels: memtrain was built without CUDA (MEMTRAIN_CUDA=OFF or nvcc not found)");
  return 0;
}
#endif
