#include "kernels/cuda/flash_attention.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/dropout.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/dtype_traits.cuh"
#include "kernels/cuda/flash_attention_mma.cuh"
#include "kernels/cuda/flash_attention_shape.cuh"

namespace memtrain::kernels::gpu {
namespace {

using flash::attends;
using flash::kept;
using flash::kRows;
using flash::kTile;
using flash::Shape;

// Keys [j0, j0 + kTile) of one head into shared memory as fp32 (zeros past T), and whether
// each is attended; returns how many of them exist. Every thread of the block calls it.
template <class T, int HS_MAX>
__device__ int load_key_tile(float (&sk)[kTile][HS_MAX + 1], float (&sv)[kTile][HS_MAX + 1], bool (&live)[kTile],
                             const T* k, const T* v, const T* key_mask, const Shape& s, int b, long long head, int j0) {
  const int n = min(kTile, s.T - j0);
  // Every column up to HS_MAX is written (zeros past HS): the backward kernels' unrolled dot
  // products read them, and a stale Inf or NaN left in shared memory times a zero is NaN.
  for (int x = threadIdx.x; x < kTile * HS_MAX; x += blockDim.x) {
    const int jj = x / HS_MAX, d = x % HS_MAX;
    const bool in = jj < n && d < s.HS;
    const long long at = head + static_cast<long long>(j0 + jj) * s.C + d;
    sk[jj][d] = in ? to_float(k[at]) : 0.0f;
    sv[jj][d] = in ? to_float(v[at]) : 0.0f;
  }
  if (threadIdx.x < kTile) live[threadIdx.x] = threadIdx.x < n && attends(key_mask, s, b, j0 + threadIdx.x);
  return n;
}

// grid (ceil(T / kRows), NH, B); thread = query row i.
template <class T, int HS_MAX>
__global__ void forward_kernel(T* out, float* lse, const T* q, const T* k, const T* v, const T* key_mask, Shape s) {
  __shared__ float sk[kTile][HS_MAX + 1], sv[kTile][HS_MAX + 1];
  __shared__ bool live[kTile];
  const int b = blockIdx.z, h = blockIdx.y, i = blockIdx.x * kRows + threadIdx.x;
  const bool row = i < s.T;
  const long long head = static_cast<long long>(b) * s.T * s.C + static_cast<long long>(h) * s.HS;
  float qi[HS_MAX], acc[HS_MAX];
#pragma unroll
  for (int d = 0; d < HS_MAX; ++d) {
    qi[d] = row && d < s.HS ? to_float(q[head + static_cast<long long>(i) * s.C + d]) : 0.0f;
    acc[d] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int j0 = 0; j0 < s.T; j0 += kTile) {
    const int n = load_key_tile<T, HS_MAX>(sk, sv, live, k, v, key_mask, s, b, head, j0);
    __syncthreads();
    if (row) {
      float sc[kTile];
      float tile_max = -INFINITY;
      for (int jj = 0; jj < n; ++jj) {
        float dot = 0.0f;
#pragma unroll
        for (int d = 0; d < HS_MAX; ++d) dot += d < s.HS ? qi[d] * sk[jj][d] : 0.0f;
        sc[jj] = live[jj] ? dot * s.scale : -INFINITY;
        tile_max = fmaxf(tile_max, sc[jj]);
      }
      if (tile_max > -INFINITY) {
        const float m_new = fmaxf(m, tile_max);
        const float alpha = expf(m - m_new);  // 0 while m is -inf
        l *= alpha;
#pragma unroll
        for (int d = 0; d < HS_MAX; ++d) acc[d] *= alpha;
        for (int jj = 0; jj < n; ++jj) {
          if (!live[jj]) continue;
          const float p = expf(sc[jj] - m_new);
          l += p;
          const float pd = s.dropout_p > 0.0f ? (kept(s, b, h, i, j0 + jj) ? p * s.keep_scale : 0.0f) : p;
          if (pd != 0.0f) {
#pragma unroll
            for (int d = 0; d < HS_MAX; ++d) acc[d] += pd * sv[jj][d];
          }
        }
        m = m_new;
      }
    }
    __syncthreads();
  }
  if (!row) return;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int d = 0; d < s.HS; ++d) out[head + static_cast<long long>(i) * s.C + d] = from_float<T>(acc[d] * inv);
  lse[(static_cast<long long>(b) * s.NH + h) * s.T + i] = l > 0.0f ? m + logf(l) : -INFINITY;
}

// grid (ceil(T / kRows), NH, B); thread = key j: dK_j, dV_j over every query i.
template <class T, int HS_MAX>
__global__ void dkdv_kernel(T* dk, T* dv, const T* dout, const T* out, const float* lse, const T* q, const T* k,
                            const T* v, const T* key_mask, Shape s) {
  __shared__ float sq[kTile][HS_MAX + 1], sdo[kTile][HS_MAX + 1];
  __shared__ float slse[kTile], sD[kTile];
  const int b = blockIdx.z, h = blockIdx.y, j = blockIdx.x * kRows + threadIdx.x;
  const long long head = static_cast<long long>(b) * s.T * s.C + static_cast<long long>(h) * s.HS;
  const bool live = j < s.T && attends(key_mask, s, b, j);
  float kj[HS_MAX], vj[HS_MAX], dkj[HS_MAX], dvj[HS_MAX];
#pragma unroll
  for (int d = 0; d < HS_MAX; ++d) {
    const bool in = live && d < s.HS;
    kj[d] = in ? to_float(k[head + static_cast<long long>(j) * s.C + d]) : 0.0f;
    vj[d] = in ? to_float(v[head + static_cast<long long>(j) * s.C + d]) : 0.0f;
    dkj[d] = 0.0f;
    dvj[d] = 0.0f;
  }
  const float* lse_bh = lse + (static_cast<long long>(b) * s.NH + h) * s.T;
  for (int i0 = 0; i0 < s.T; i0 += kTile) {
    const int n = min(kTile, s.T - i0);
    // Zeros past HS, as in load_key_tile: the dot products below run to HS_MAX.
    for (int x = threadIdx.x; x < kTile * HS_MAX; x += blockDim.x) {
      const int ii = x / HS_MAX, d = x % HS_MAX;
      const bool in = ii < n && d < s.HS;
      const long long at = head + static_cast<long long>(i0 + ii) * s.C + d;
      sq[ii][d] = in ? to_float(q[at]) : 0.0f;
      sdo[ii][d] = in ? to_float(dout[at]) : 0.0f;
    }
    if (threadIdx.x < kTile) {
      const int ii = threadIdx.x;
      float D = 0.0f;
      if (ii < n) {
        const long long row = head + static_cast<long long>(i0 + ii) * s.C;
        for (int d = 0; d < s.HS; ++d) D += to_float(dout[row + d]) * to_float(out[row + d]);
      }
      sD[ii] = D;
      slse[ii] = ii < n ? lse_bh[i0 + ii] : -INFINITY;
    }
    __syncthreads();
    if (live) {
      for (int ii = 0; ii < n; ++ii) {
        if (slse[ii] == -INFINITY) continue;  // a fully padded query row: no probabilities
        float dot = 0.0f, dpt = 0.0f;
#pragma unroll
        for (int d = 0; d < HS_MAX; ++d) {
          dot += sq[ii][d] * kj[d];
          dpt += sdo[ii][d] * vj[d];
        }
        const float p = expf(dot * s.scale - slse[ii]);
        const float z = s.dropout_p > 0.0f ? (kept(s, b, h, i0 + ii, j) ? s.keep_scale : 0.0f) : 1.0f;
        const float ds = p * (z * dpt - sD[ii]) * s.scale;
#pragma unroll
        for (int d = 0; d < HS_MAX; ++d) {
          dvj[d] += z * p * sdo[ii][d];
          dkj[d] += ds * sq[ii][d];
        }
      }
    }
    __syncthreads();
  }
  if (j >= s.T) return;
  for (int d = 0; d < s.HS; ++d) {
    const long long at = head + static_cast<long long>(j) * s.C + d;
    dk[at] = from_float<T>(to_float(dk[at]) + dkj[d]);
    dv[at] = from_float<T>(to_float(dv[at]) + dvj[d]);
  }
}

// grid (ceil(T / kRows), NH, B); thread = query i: dQ_i over every key j.
template <class T, int HS_MAX>
__global__ void dq_kernel(T* dq, const T* dout, const T* out, const float* lse, const T* q, const T* k, const T* v,
                          const T* key_mask, Shape s) {
  __shared__ float sk[kTile][HS_MAX + 1], sv[kTile][HS_MAX + 1];
  __shared__ bool live[kTile];
  const int b = blockIdx.z, h = blockIdx.y, i = blockIdx.x * kRows + threadIdx.x;
  const long long head = static_cast<long long>(b) * s.T * s.C + static_cast<long long>(h) * s.HS;
  const float lse_i = i < s.T ? lse[(static_cast<long long>(b) * s.NH + h) * s.T + i] : -INFINITY;
  const bool row = i < s.T && lse_i != -INFINITY;
  float qi[HS_MAX], doi[HS_MAX], dqi[HS_MAX];
  float D = 0.0f;
#pragma unroll
  for (int d = 0; d < HS_MAX; ++d) {
    const bool in = row && d < s.HS;
    const long long at = head + static_cast<long long>(i) * s.C + d;
    qi[d] = in ? to_float(q[at]) : 0.0f;
    doi[d] = in ? to_float(dout[at]) : 0.0f;
    D += in ? doi[d] * to_float(out[at]) : 0.0f;
    dqi[d] = 0.0f;
  }
  for (int j0 = 0; j0 < s.T; j0 += kTile) {
    const int n = load_key_tile<T, HS_MAX>(sk, sv, live, k, v, key_mask, s, b, head, j0);
    __syncthreads();
    if (row) {
      for (int jj = 0; jj < n; ++jj) {
        if (!live[jj]) continue;
        float dot = 0.0f, dpt = 0.0f;
#pragma unroll
        for (int d = 0; d < HS_MAX; ++d) {
          dot += qi[d] * sk[jj][d];
          dpt += doi[d] * sv[jj][d];
        }
        const float p = expf(dot * s.scale - lse_i);
        const float z = s.dropout_p > 0.0f ? (kept(s, b, h, i, j0 + jj) ? s.keep_scale : 0.0f) : 1.0f;
        const float ds = p * (z * dpt - D) * s.scale;
#pragma unroll
        for (int d = 0; d < HS_MAX; ++d) dqi[d] += ds * sk[jj][d];
      }
    }
    __syncthreads();
  }
  if (i >= s.T) return;
  for (int d = 0; d < s.HS; ++d) {
    const long long at = head + static_cast<long long>(i) * s.C + d;
    dq[at] = from_float<T>(to_float(dq[at]) + dqi[d]);
  }
}

Shape make_shape(const char* fn, int B, int T, int C, int NH, float dropout_p, const RngKey& key,
                 std::uint64_t first_sample, int first_head) {
  kernels::check_attention_arguments(fn, C, NH, dropout_p);
  if (C / NH > kFlashMaxHeadSize) {
    throw std::invalid_argument(std::string(fn) + ": head size " + std::to_string(C / NH) + "; expected at most " +
                                std::to_string(kFlashMaxHeadSize));
  }
  Shape s{};
  s.B = B;
  s.T = T;
  s.C = C;
  s.NH = NH;
  s.HS = C / NH;
  s.scale = 1.0f / std::sqrt(static_cast<float>(s.HS));
  s.dropout_p = dropout_p;
  s.keep_scale = 1.0f / (1.0f - dropout_p);
  s.threshold = dropout_keep_threshold(dropout_p);
  const auto words = PhiloxStream(key).key_words();
  s.k0 = words[0];
  s.k1 = words[1];
  s.first_sample = first_sample;
  s.first_element = static_cast<std::uint64_t>(first_head) * T * static_cast<std::uint64_t>(T);
  return s;
}

}  // namespace

template <class T>
void flash_attention_forward(const KernelContext& ctx, T* out, float* lse, const T* q, const T* k, const T* v,
                             const T* key_mask, int B, int T_, int C, int NH, float dropout_p, const RngKey& key,
                             std::uint64_t first_sample, int first_head) {
  const Shape s = make_shape("flash_attention_forward", B, T_, C, NH, dropout_p, key, first_sample, first_head);
  if (B == 0 || T_ == 0) return;
  if constexpr (!std::is_same_v<T, float>) {
    if (flash::mma_forward_applies<T>(s)) {
      flash::forward_mma<T>(ctx, out, lse, q, k, v, key_mask, s);
      return;
    }
  }
  const dim3 grid((T_ + kRows - 1) / kRows, NH, B);
  if (s.HS <= 64) {
    forward_kernel<T, 64><<<grid, kRows, 0, ctx.stream>>>(out, lse, q, k, v, key_mask, s);
  } else {
    forward_kernel<T, 128><<<grid, kRows, 0, ctx.stream>>>(out, lse, q, k, v, key_mask, s);
  }
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

template <class T>
void flash_attention_backward(const KernelContext& ctx, T* dq, T* dk, T* dv, const T* dout, const T* out,
                              const float* lse, const T* q, const T* k, const T* v, const T* key_mask, int B, int T_,
                              int C, int NH, float dropout_p, const RngKey& key, std::uint64_t first_sample,
                              int first_head) {
  const Shape s = make_shape("flash_attention_backward", B, T_, C, NH, dropout_p, key, first_sample, first_head);
  if (B == 0 || T_ == 0) return;
  if constexpr (!std::is_same_v<T, float>) {
    if (flash::mma_forward_applies<T>(s)) {
      flash::backward_mma<T>(ctx, dq, dk, dv, dout, out, lse, q, k, v, key_mask, s);
      return;
    }
  }
  const dim3 grid((T_ + kRows - 1) / kRows, NH, B);
  if (s.HS <= 64) {
    dkdv_kernel<T, 64><<<grid, kRows, 0, ctx.stream>>>(dk, dv, dout, out, lse, q, k, v, key_mask, s);
    MEMTRAIN_CUDA_CHECK_LAUNCH();
    dq_kernel<T, 64><<<grid, kRows, 0, ctx.stream>>>(dq, dout, out, lse, q, k, v, key_mask, s);
  } else {
    dkdv_kernel<T, 128><<<grid, kRows, 0, ctx.stream>>>(dk, dv, dout, out, lse, q, k, v, key_mask, s);
    MEMTRAIN_CUDA_CHECK_LAUNCH();
    dq_kernel<T, 128><<<grid, kRows, 0, ctx.stream>>>(dq, dout, out, lse, q, k, v, key_mask, s);
  }
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

#define MEMTRAIN_INSTANTIATE(T)                                                                                      \
  template void flash_attention_forward<T>(const KernelContext&, T*, float*, const T*, const T*, const T*, const T*, \
                                           int, int, int, int, float, const RngKey&, std::uint64_t, int);            \
  template void flash_attention_backward<T>(const KernelContext&, T*, T*, T*, const T*, const T*, const float*,      \
                                            const T*, const T*, const T*, const T*, int, int, int, int, float,       \
                                            const RngKey&, std::uint64_t, int);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(__nv_bfloat16)
MEMTRAIN_INSTANTIATE(__half)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels::gpu
