#include "kernels/cuda/layernorm.hpp"

#include "kernels/cuda/column_reduce.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/dtype_traits.cuh"

namespace memtrain::kernels::gpu {
namespace {

constexpr int kWarpsPerBlock = 8;

template <class T>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* x, const T* gamma, const T* beta,
                                         int N, int C, float eps) {
  const int n = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (n >= N) return;
  const T* row = x + static_cast<long long>(n) * C;
  float s = 0.0f;
  for (int c = lane; c < C; c += 32) s += to_float(row[c]);
  const float mu = warp_sum(s) / C;
  float ss = 0.0f;
  for (int c = lane; c < C; c += 32) {
    const float d = to_float(row[c]) - mu;
    ss += d * d;
  }
  const float r = rsqrtf(warp_sum(ss) / C + eps);
  T* o = out + static_cast<long long>(n) * C;
  for (int c = lane; c < C; c += 32) {
    o[c] = from_float<T>((to_float(row[c]) - mu) * r * to_float(gamma[c]) + to_float(beta[c]));
  }
  if (lane == 0) {
    mean[n] = mu;
    rstd[n] = r;
  }
}

template <class T>
__global__ void layernorm_dx_kernel(T* dx, const T* dout, const T* x, const T* gamma, const float* mean,
                                    const float* rstd, int N, int C) {
  const int n = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (n >= N) return;
  const long long base = static_cast<long long>(n) * C;
  const float mu = mean[n], r = rstd[n];
  float sg = 0.0f, sgx = 0.0f;
  // g is rounded the same way in both loops (__fmul_rn is never fused into an FMA), so that
  // g - mean_c(g) is exactly 0 where it should be: with C = 1 it is multiplied by rstd = 1/sqrt(eps)
  // and a fused product's leftover rounding came out as an error of 1e-2.
  for (int c = lane; c < C; c += 32) {
    const float g = __fmul_rn(to_float(dout[base + c]), to_float(gamma[c]));
    sg += g;
    sgx += g * (to_float(x[base + c]) - mu) * r;
  }
  const float mean_g = warp_sum(sg) / C, mean_gx = warp_sum(sgx) / C;
  for (int c = lane; c < C; c += 32) {
    const float g = __fmul_rn(to_float(dout[base + c]), to_float(gamma[c]));
    const float xhat = (to_float(x[base + c]) - mu) * r;
    dx[base + c] = from_float<T>(to_float(dx[base + c]) + r * (g - mean_g - xhat * mean_gx));
  }
}

template <class T>
__global__ void layernorm_params_kernel(T* dgamma, T* dbeta, const T* dout, const T* x, const float* mean,
                                        const float* rstd, int N, int C) {
  __shared__ float shared[kRowGroups][kColumns];
  const int c = blockIdx.x * kColumns + threadIdx.x;
  float pg = 0.0f, pb = 0.0f;
  if (c < C) {
    for (int n = threadIdx.y; n < N; n += kRowGroups) {
      const long long i = static_cast<long long>(n) * C + c;
      const float d = to_float(dout[i]);
      pg += d * (to_float(x[i]) - mean[n]) * rstd[n];
      pb += d;
    }
  }
  const float sg = reduce_row_groups(pg, shared);
  const float sb = reduce_row_groups(pb, shared);
  if (threadIdx.y == 0 && c < C) {
    if (dgamma != nullptr) dgamma[c] = from_float<T>(to_float(dgamma[c]) + sg);
    if (dbeta != nullptr) dbeta[c] = from_float<T>(to_float(dbeta[c]) + sb);
  }
}

}  // namespace

template <class T>
void layernorm_forward(const KernelContext& ctx, T* out, float* mean, float* rstd, const T* x, const T* gamma,
                       const T* beta, int N, int C, float eps) {
  if (N == 0 || C == 0) return;
  layernorm_forward_kernel<<<(N + kWarpsPerBlock - 1) / kWarpsPerBlock, 32 * kWarpsPerBlock, 0, ctx.stream>>>(
      out, mean, rstd, x, gamma, beta, N, C, eps);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

template <class T>
void layernorm_backward(const KernelContext& ctx, T* dx, T* dgamma, T* dbeta, const T* dout, const T* x, const T* gamma,
                        const float* mean, const float* rstd, int N, int C) {
  if (N == 0 || C == 0) return;
  layernorm_dx_kernel<<<(N + kWarpsPerBlock - 1) / kWarpsPerBlock, 32 * kWarpsPerBlock, 0, ctx.stream>>>(
      dx, dout, x, gamma, mean, rstd, N, C);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
  if (dgamma == nullptr && dbeta == nullptr) return;
  layernorm_params_kernel<<<(C + kColumns - 1) / kColumns, dim3(kColumns, kRowGroups), 0, ctx.stream>>>(
      dgamma, dbeta, dout, x, mean, rstd, N, C);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

#define MEMTRAIN_INSTANTIATE(T)                                                                                        \
  template void layernorm_forward<T>(const KernelContext&, T*, float*, float*, const T*, const T*, const T*, int, int, \
                                     float);                                                                           \
  template void layernorm_backward<T>(const KernelContext&, T*, T*, T*, const T*, const T*, const T*, const float*,    \
                                      const float*, int, int);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(__nv_bfloat16)
MEMTRAIN_INSTANTIATE(__half)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels::gpu
