#include "kernels/cuda/gelu.hpp"

#include "kernels/cuda/column_reduce.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/dtype_traits.cuh"

namespace memtrain::kernels::gpu {
namespace {

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

__device__ __forceinline__ float gelu(float x) { return 0.5f * x * (1.0f + erff(x * kInvSqrt2)); }
__device__ __forceinline__ float gelu_grad(float x) {
  const float cdf = 0.5f * (1.0f + erff(x * kInvSqrt2));
  return cdf + x * kInvSqrt2Pi * expf(-0.5f * x * x);
}

template <class T>
__global__ void bias_gelu_forward_kernel(T* out, const T* inp, const T* bias, long long total, int C) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const float b = bias != nullptr ? to_float(bias[i % C]) : 0.0f;
    out[i] = from_float<T>(gelu(to_float(inp[i]) + b));
  }
}

// Block (kColumns, kRowGroups) per kColumns columns: Note [Deterministic column sums].
template <class T>
__global__ void bias_gelu_backward_kernel(T* dinp, T* dbias, const T* dout, const T* inp, const T* bias, int N, int C) {
  __shared__ float shared[kRowGroups][kColumns];
  const int c = blockIdx.x * kColumns + threadIdx.x;
  float partial = 0.0f;
  if (c < C) {
    const float b = bias != nullptr ? to_float(bias[c]) : 0.0f;
    for (int n = threadIdx.y; n < N; n += kRowGroups) {
      const long long i = static_cast<long long>(n) * C + c;
      const float d = to_float(dout[i]) * gelu_grad(to_float(inp[i]) + b);
      dinp[i] = from_float<T>(d);
      partial += d;
    }
  }
  const float s = reduce_row_groups(partial, shared);
  if (threadIdx.y == 0 && c < C && dbias != nullptr) dbias[c] = from_float<T>(to_float(dbias[c]) + s);
}

}  // namespace

template <class T>
void bias_gelu_forward(const KernelContext& ctx, T* out, const T* inp, const T* bias, int N, int C) {
  const long long total = static_cast<long long>(N) * C;
  if (total == 0) return;
  bias_gelu_forward_kernel<<<blocks_for(total, 256), 256, 0, ctx.stream>>>(out, inp, bias, total, C);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

template <class T>
void bias_gelu_backward(const KernelContext& ctx, T* dinp, T* dbias, const T* dout, const T* inp, const T* bias, int N,
                        int C) {
  if (N == 0 || C == 0) return;
  bias_gelu_backward_kernel<<<(C + kColumns - 1) / kColumns, dim3(kColumns, kRowGroups), 0, ctx.stream>>>(
      dinp, dbias, dout, inp, bias, N, C);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

#define MEMTRAIN_INSTANTIATE(T)                                                               \
  template void bias_gelu_forward<T>(const KernelContext&, T*, const T*, const T*, int, int); \
  template void bias_gelu_backward<T>(const KernelContext&, T*, T*, const T*, const T*, const T*, int, int);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(__nv_bfloat16)
MEMTRAIN_INSTANTIATE(__half)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels::gpu
