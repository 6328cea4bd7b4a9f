#include "kernels/cuda/cross_entropy.hpp"

#include <cfloat>
#include <stdexcept>
#include <string>

#include "kernels/cuda/column_reduce.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/dtype_traits.cuh"

namespace memtrain::kernels::gpu {
namespace {

constexpr int kThreads = 256;

// Scratch layout: [0] double loss sum, [8] int64 correct count, [16] int32 first bad row,
// [24..) per-row double losses [M], then per-row int32 correct flags [M].
struct Scratch {
  double* loss_sum;
  long long* correct;
  int* bad_row;
  double* row_loss;
  int* row_correct;
};
Scratch carve(void* base, int M) {
  auto* b = static_cast<char*>(base);
  return {reinterpret_cast<double*>(b), reinterpret_cast<long long*>(b + 8), reinterpret_cast<int*>(b + 16),
          reinterpret_cast<double*>(b + 24), reinterpret_cast<int*>(b + 24 + 8 * static_cast<std::size_t>(M))};
}

__global__ void check_targets_kernel(int* bad_row, const std::int32_t* targets, int M, int V) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < M && (targets[r] < 0 || targets[r] >= V)) atomicMin(bad_row, r);
}

// Block-wide sum through shared memory, in a fixed order.
__device__ float block_sum(float x, float* shared) {
  x = warp_sum(x);
  if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = x;
  __syncthreads();
  float s = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) s += shared[w];
  __syncthreads();
  return s;
}

// One block per row.
template <class T>
__global__ void cross_entropy_kernel(T* dlogits, const T* logits, const std::int32_t* targets, int V, float grad_scale,
                                     double* row_loss, int* row_correct) {
  __shared__ float shared[kThreads / 32];
  __shared__ int shared_idx[kThreads / 32];
  const long long base = static_cast<long long>(blockIdx.x) * V;
  // Max and its first index: per thread (ascending j), then across threads by (value, index).
  float m = -FLT_MAX;
  int arg = V;
  for (int j = threadIdx.x; j < V; j += kThreads) {
    const float x = to_float(logits[base + j]);
    if (x > m) {
      m = x;
      arg = j;
    }
  }
  for (int o = 16; o > 0; o /= 2) {
    const float om = __shfl_xor_sync(0xffffffffu, m, o);
    const int oa = __shfl_xor_sync(0xffffffffu, arg, o);
    if (om > m || (om == m && oa < arg)) {
      m = om;
      arg = oa;
    }
  }
  if (threadIdx.x % 32 == 0) {
    shared[threadIdx.x / 32] = m;
    shared_idx[threadIdx.x / 32] = arg;
  }
  __syncthreads();
  float row_max = -FLT_MAX;
  int row_arg = V;
  for (int w = 0; w < kThreads / 32; ++w) {
    if (shared[w] > row_max || (shared[w] == row_max && shared_idx[w] < row_arg)) {
      row_max = shared[w];
      row_arg = shared_idx[w];
    }
  }
  __syncthreads();
  float s = 0.0f;
  for (int j = threadIdx.x; j < V; j += kThreads) s += expf(to_float(logits[base + j]) - row_max);
  const float sum = block_sum(s, shared);
  const int target = targets[blockIdx.x];
  const float target_logit = to_float(logits[base + target]);
  __syncthreads();  // every thread has read logits[target] before dlogits (maybe aliased) is written
  if (threadIdx.x == 0) {
    row_loss[blockIdx.x] = static_cast<double>(logf(sum) - (target_logit - row_max));
    row_correct[blockIdx.x] = row_arg == target ? 1 : 0;
  }
  if (dlogits == nullptr) return;
  const float inv = 1.0f / sum;
  for (int j = threadIdx.x; j < V; j += kThreads) {
    const float p = expf(to_float(logits[base + j]) - row_max) * inv;
    dlogits[base + j] = from_float<T>((p - (j == target ? 1.0f : 0.0f)) * grad_scale);
  }
}

// One thread adds the rows in order: M is the number of masked tokens (thousands), and a fixed
// order keeps the loss bitwise the same from run to run.
__global__ void sum_rows_kernel(double* loss_sum, long long* correct, const double* row_loss, const int* row_correct,
                                int M) {
  double s = 0.0;
  long long c = 0;
  for (int r = 0; r < M; ++r) {
    s += row_loss[r];
    c += row_correct[r];
  }
  *loss_sum = s;
  *correct = c;
}

}  // namespace

std::size_t cross_entropy_scratch_bytes(int M) { return 24 + 12 * static_cast<std::size_t>(M); }

template <class T>
double softmax_cross_entropy_forward_backward(const KernelContext& ctx, T* dlogits, const T* logits,
                                              const std::int32_t* targets, int M, int V, float grad_scale,
                                              std::int64_t* num_correct) {
  if (num_correct != nullptr) *num_correct = 0;
  if (M == 0) return 0.0;
  if (ctx.scratch_bytes < cross_entropy_scratch_bytes(M)) {
    throw std::invalid_argument("softmax_cross_entropy_forward_backward: scratch of " +
                                std::to_string(ctx.scratch_bytes) + " bytes; needs " +
                                std::to_string(cross_entropy_scratch_bytes(M)));
  }
  const Scratch s = carve(ctx.scratch, M);
  // Targets are checked before anything is written, as on the CPU.
  const int none = M;
  MEMTRAIN_CUDA_CHECK(cudaMemcpyAsync(s.bad_row, &none, sizeof none, cudaMemcpyHostToDevice, ctx.stream));
  check_targets_kernel<<<(M + 255) / 256, 256, 0, ctx.stream>>>(s.bad_row, targets, M, V);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
  int bad = M;
  MEMTRAIN_CUDA_CHECK(cudaMemcpyAsync(&bad, s.bad_row, sizeof bad, cudaMemcpyDeviceToHost, ctx.stream));
  MEMTRAIN_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  if (bad < M) {
    std::int32_t t = 0;
    MEMTRAIN_CUDA_CHECK(cudaMemcpy(&t, targets + bad, sizeof t, cudaMemcpyDeviceToHost));
    throw std::out_of_range("softmax_cross_entropy: row " + std::to_string(bad) + " has target " + std::to_string(t) +
                            "; expected a class in [0, " + std::to_string(V) + ")");
  }
  cross_entropy_kernel<<<M, kThreads, 0, ctx.stream>>>(dlogits, logits, targets, V, grad_scale, s.row_loss,
                                                       s.row_correct);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
  sum_rows_kernel<<<1, 1, 0, ctx.stream>>>(s.loss_sum, s.correct, s.row_loss, s.row_correct, M);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
  double loss = 0.0;
  long long correct = 0;
  MEMTRAIN_CUDA_CHECK(cudaMemcpyAsync(&loss, s.loss_sum, sizeof loss, cudaMemcpyDeviceToHost, ctx.stream));
  MEMTRAIN_CUDA_CHECK(cudaMemcpyAsync(&correct, s.correct, sizeof correct, cudaMemcpyDeviceToHost, ctx.stream));
  MEMTRAIN_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  if (num_correct != nullptr) *num_correct = correct;
  return loss;
}

#define MEMTRAIN_INSTANTIATE(T)                                                                                      \
  template double softmax_cross_entropy_forward_backward<T>(const KernelContext&, T*, const T*, const std::int32_t*, \
                                                            int, int, float, std::int64_t*);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(__nv_bfloat16)
MEMTRAIN_INSTANTIATE(__half)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels::gpu
