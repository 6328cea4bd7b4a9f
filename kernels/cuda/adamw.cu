#include "kernels/cuda/adamw.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/dtype_traits.cuh"

namespace memtrain::kernels::gpu {
namespace {

struct AdamCoefficients {
  float step_size, inv_sqrt_bc2, decay, beta1, beta2, one_minus_b1, one_minus_b2, eps, grad_scale;
};

// kernels/cpu/adamw.cpp's adamw_loop, rounded the same way.
AdamCoefficients coefficients(float lr, float beta1, float beta2, float eps, float weight_decay, std::int64_t step,
                              float grad_scale, const char* who) {
  if (step < 1) {
    throw std::invalid_argument(std::string(who) + ": step = " + std::to_string(step) +
                                "; expected the 1-based count of updates");
  }
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step));
  return {static_cast<float>(lr / bc1),
          static_cast<float>(1.0 / std::sqrt(bc2)),
          1.0f - lr * weight_decay,
          beta1,
          beta2,
          1.0f - beta1,
          1.0f - beta2,
          eps,
          grad_scale};
}

// Note [No fused multiply-add in AdamW]
// nvcc contracts a * b + c into one FMA by default, which rounds once where the CPU (compiled
// with GCC's ISO default -ffp-contract=off) rounds twice. The _rn intrinsics are never
// contracted, so the GPU's update is bitwise the CPU's and a CPU run can check a GPU run.
__device__ __forceinline__ float adam_element(float p, float g, float& m, float& v, const AdamCoefficients& k) {
  const float mi = __fadd_rn(__fmul_rn(k.beta1, m), __fmul_rn(k.one_minus_b1, g));
  const float vi = __fadd_rn(__fmul_rn(k.beta2, v), __fmul_rn(__fmul_rn(k.one_minus_b2, g), g));
  m = mi;
  v = vi;
  const float denom = __fadd_rn(__fmul_rn(__fsqrt_rn(vi), k.inv_sqrt_bc2), k.eps);
  return __fsub_rn(__fmul_rn(p, k.decay), __fdiv_rn(__fmul_rn(k.step_size, mi), denom));
}

__global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, long long n, AdamCoefficients k) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    float mi = m[i], vi = v[i];
    param[i] = adam_element(param[i], __fmul_rn(grad[i], k.grad_scale), mi, vi, k);
    m[i] = mi;
    v[i] = vi;
  }
}

// The CPU's rounding of a master into its 16-bit copy: round to nearest even, NaNs as the CPU
// makes them quiet (dtype_traits.cuh).
__device__ __forceinline__ __nv_bfloat16 rounded_copy(float p, const __nv_bfloat16*) {
  return __ushort_as_bfloat16(bf16_bits_from_float(p));
}
__device__ __forceinline__ __half rounded_copy(float p, const __half*) {
  return __ushort_as_half(f16_bits_from_float(p));
}

// AdamW on an fp32 master whose 16-bit copy (H: __nv_bfloat16 or __half) is rewritten, reading a
// gradient stored in H.
template <class H>
__global__ void adamw_half_kernel(float* master, H* value, const H* grad, float* m, float* v, long long n,
                                  AdamCoefficients k) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    float mi = m[i], vi = v[i];
    const float p = adam_element(master[i], __fmul_rn(to_float(grad[i]), k.grad_scale), mi, vi, k);
    master[i] = p;
    m[i] = mi;
    v[i] = vi;
    value[i] = rounded_copy(p, grad);
  }
}

__global__ void scale_kernel(float* x, long long n, float s) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    x[i] = __fmul_rn(x[i], s);
  }
}

constexpr int kReduceBlocks = 1024;
constexpr int kReduceThreads = 256;

template <class T>
__global__ void sum_of_squares_kernel(double* partial, const T* x, long long n) {
  __shared__ double shared[kReduceThreads];
  double s = 0.0;
  for (long long i = blockIdx.x * static_cast<long long>(kReduceThreads) + threadIdx.x; i < n;
       i += static_cast<long long>(kReduceBlocks) * kReduceThreads) {
    const double e = to_float(x[i]);
    s += e * e;
  }
  shared[threadIdx.x] = s;
  __syncthreads();
  for (int w = kReduceThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) shared[threadIdx.x] += shared[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = shared[0];
}

__global__ void sum_partials_kernel(double* out, const double* partial) {
  double s = 0.0;
  for (int b = 0; b < kReduceBlocks; ++b) s += partial[b];
  *out = s;
}

template <class T>
__global__ void all_finite_kernel(int* non_finite, const T* x, long long n) {
  bool bad = false;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    bad |= !isfinite(to_float(x[i]));
  }
  if (bad) *non_finite = 1;  // any writer sets the same value: no atomics needed
}

}  // namespace

void adamw_update(const KernelContext& ctx, float* param, const float* grad, float* m, float* v, std::int64_t n,
                  float lr, float beta1, float beta2, float eps, float weight_decay, std::int64_t step,
                  float grad_scale) {
  const AdamCoefficients k = coefficients(lr, beta1, beta2, eps, weight_decay, step, grad_scale, "adamw_update");
  if (n == 0) return;
  adamw_kernel<<<blocks_for(n, 256), 256, 0, ctx.stream>>>(param, grad, m, v, n, k);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

void adamw_update_bf16(const KernelContext& ctx, float* master, __nv_bfloat16* value, const __nv_bfloat16* grad,
                       float* m, float* v, std::int64_t n, float lr, float beta1, float beta2, float eps,
                       float weight_decay, std::int64_t step, float grad_scale) {
  const AdamCoefficients k = coefficients(lr, beta1, beta2, eps, weight_decay, step, grad_scale, "adamw_update_bf16");
  if (n == 0) return;
  adamw_half_kernel<<<blocks_for(n, 256), 256, 0, ctx.stream>>>(master, value, grad, m, v, n, k);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

void adamw_update_f16(const KernelContext& ctx, float* master, __half* value, const __half* grad, float* m, float* v,
                      std::int64_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                      std::int64_t step, float grad_scale) {
  const AdamCoefficients k = coefficients(lr, beta1, beta2, eps, weight_decay, step, grad_scale, "adamw_update_f16");
  if (n == 0) return;
  adamw_half_kernel<<<blocks_for(n, 256), 256, 0, ctx.stream>>>(master, value, grad, m, v, n, k);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

void scale_inplace(const KernelContext& ctx, float* x, std::int64_t n, float s) {
  if (n == 0) return;
  scale_kernel<<<blocks_for(n, 256), 256, 0, ctx.stream>>>(x, n, s);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

std::size_t reduction_scratch_bytes() { return sizeof(double) * (kReduceBlocks + 1); }

namespace {
void require_scratch(const KernelContext& ctx, const char* who) {
  if (ctx.scratch_bytes < reduction_scratch_bytes()) {
    throw std::invalid_argument(std::string(who) + ": scratch of " + std::to_string(ctx.scratch_bytes) +
                                " bytes; needs " + std::to_string(reduction_scratch_bytes()));
  }
}
}  // namespace

template <class T>
double sum_of_squares(const KernelContext& ctx, const T* x, std::int64_t n) {
  require_scratch(ctx, "sum_of_squares");
  auto* partial = static_cast<double*>(ctx.scratch);
  double* out = partial + kReduceBlocks;
  sum_of_squares_kernel<<<kReduceBlocks, kReduceThreads, 0, ctx.stream>>>(partial, x, n);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
  sum_partials_kernel<<<1, 1, 0, ctx.stream>>>(out, partial);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
  double result = 0.0;
  MEMTRAIN_CUDA_CHECK(cudaMemcpyAsync(&result, out, sizeof result, cudaMemcpyDeviceToHost, ctx.stream));
  MEMTRAIN_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  return result;
}

template <class T>
bool all_finite(const KernelContext& ctx, const T* x, std::int64_t n) {
  require_scratch(ctx, "all_finite");
  int* flag = static_cast<int*>(ctx.scratch);
  MEMTRAIN_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int), ctx.stream));
  if (n > 0) {
    all_finite_kernel<<<blocks_for(n, 256), 256, 0, ctx.stream>>>(flag, x, n);
    MEMTRAIN_CUDA_CHECK_LAUNCH();
  }
  int bad = 0;
  MEMTRAIN_CUDA_CHECK(cudaMemcpyAsync(&bad, flag, sizeof bad, cudaMemcpyDeviceToHost, ctx.stream));
  MEMTRAIN_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  return bad == 0;
}

#define MEMTRAIN_INSTANTIATE(T)                                                    \
  template double sum_of_squares<T>(const KernelContext&, const T*, std::int64_t); \
  template bool all_finite<T>(const KernelContext&, const T*, std::int64_t);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(__nv_bfloat16)
MEMTRAIN_INSTANTIATE(__half)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels::gpu
