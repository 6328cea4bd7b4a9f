#include <mma.h>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/flash_attention_mma.cuh"

namespace memtrain::kernels::gpu::flash {
namespace {

using namespace nvcuda;

constexpr int kHS = kMmaHeadSize;
constexpr int kBlock = 64;  // keys (dK, dV) or queries (dQ) per block: 4 warps x 16
constexpr int kStep = 64;   // queries (dK, dV) or keys (dQ) per tile of the walk
constexpr int kLd16 = kMmaLd16;
constexpr int kLd32 = kMmaLd32;

// Shared memory of both backward kernels: the block's own rows (A, B: K and V, or Q and dO),
// the walked tile (X, Y: Q and dO, or K and V), two fp32 [16][64] products a warp (S, dP), two
// T [16][64] operands a warp (P, dS), and per walked row two floats (lse and D, or the mask).
struct BackwardLayout {
  static constexpr int a = 0;
  static constexpr int b = a + kBlock * kLd16 * 2;
  static constexpr int x = b + kBlock * kLd16 * 2;
  static constexpr int y = x + kStep * kLd16 * 2;
  static constexpr int s = y + kStep * kLd16 * 2;
  static constexpr int dp = s + 4 * 16 * kLd32 * 4;
  static constexpr int p = dp + 4 * 16 * kLd32 * 4;
  static constexpr int ds = p + 4 * 16 * kLd16 * 2;
  static constexpr int row0 = ds + 4 * 16 * kLd16 * 2;  // float [kStep] or [kBlock]
  static constexpr int row1 = row0 + 64 * 4;
  static constexpr int row2 = row1 + 64 * 4;  // float [kBlock]: the block's own rows
  static constexpr int row3 = row2 + 64 * 4;
  static constexpr int bytes = row3 + 64 * 4;
};

template <class T>
__device__ void load_rows(T* dst, const T* src, long long head, int first, int T_, int C) {
  for (int x = threadIdx.x; x < 64 * kHS; x += blockDim.x) {
    const int r = x / kHS, d = x % kHS;
    dst[r * kLd16 + d] = first + r < T_ ? src[head + static_cast<long long>(first + r) * C + d] : from_float<T>(0.0f);
  }
}

// D_i = dout_i . out_i for rows [first, first + 64) into dst (0 past T).
template <class T>
__device__ void load_delta(float* dst, const T* dout, const T* out, long long head, int first, int T_, int C) {
  for (int r = threadIdx.x; r < 64; r += blockDim.x) {
    float d = 0.0f;
    if (first + r < T_) {
      const long long row = head + static_cast<long long>(first + r) * C;
      for (int c = 0; c < kHS; ++c) d += to_float(dout[row + c]) * to_float(out[row + c]);
    }
    dst[r] = d;
  }
}

// acc[n] (n over the 4 column tiles of 16) += A_w [16][64] . B, B row-major [64][64] (ld kLd16).
template <class T>
__device__ void mma_accumulate(wmma::fragment<wmma::accumulator, 16, 16, 16, float> (&acc)[4], const T* a_w,
                               const T* b) {
  for (int nt = 0; nt < 4; ++nt) {
    for (int kt = 0; kt < 4; ++kt) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
      wmma::load_matrix_sync(fa, a_w + kt * 16, kLd16);
      wmma::load_matrix_sync(fb, b + (kt * 16) * kLd16 + nt * 16, kLd16);
      wmma::mma_sync(acc[nt], fa, fb, acc[nt]);
    }
  }
}

// out_w [16][64] fp32 = A_w [16][64] . Bt^T, Bt row-major [64][64]: the product with the walked
// rows' transpose (S = Q K^T and dP = dO V^T, or their transposes).
template <class T>
__device__ void mma_transposed(float* out_w, const T* a_w, const T* bt) {
  for (int nt = 0; nt < 4; ++nt) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int kt = 0; kt < 4; ++kt) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
      wmma::load_matrix_sync(fa, a_w + kt * 16, kLd16);
      wmma::load_matrix_sync(fb, bt + (nt * 16) * kLd16 + kt * 16, kLd16);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(out_w + nt * 16, acc, kLd32, wmma::mem_row_major);
  }
}

// Adds the fragments (16 rows x 64 columns of a warp) to global rows [first, first + 16).
template <class T>
__device__ void add_to_global(T* dst, wmma::fragment<wmma::accumulator, 16, 16, 16, float> (&acc)[4], float* stage,
                              long long head, int first, int T_, int C) {
  for (int nt = 0; nt < 4; ++nt) wmma::store_matrix_sync(stage + nt * 16, acc[nt], kLd32, wmma::mem_row_major);
  __syncwarp();
  const int lane = threadIdx.x % 32;
  for (int x = lane; x < 16 * kHS; x += 32) {
    const int r = x / kHS, d = x % kHS;
    if (first + r >= T_) continue;
    const long long at = head + static_cast<long long>(first + r) * C + d;
    dst[at] = from_float<T>(to_float(dst[at]) + stage[r * kLd32 + d]);
  }
}

template <class T>
__global__ void __launch_bounds__(128) dkdv_mma_kernel(T* dk, T* dv, const T* dout, const T* out, const float* lse,
                                                       const T* q, const T* k, const T* v, const T* key_mask, Shape s) {
  extern __shared__ __align__(128) unsigned char smem[];
  using L = BackwardLayout;
  T* sk = reinterpret_cast<T*>(smem + L::a);
  T* sv = reinterpret_cast<T*>(smem + L::b);
  T* sq = reinterpret_cast<T*>(smem + L::x);
  T* sdo = reinterpret_cast<T*>(smem + L::y);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* st = reinterpret_cast<float*>(smem + L::s) + warp * 16 * kLd32;    // S^T [16 keys][64 queries]
  float* dpt = reinterpret_cast<float*>(smem + L::dp) + warp * 16 * kLd32;  // dP^T
  T* pt = reinterpret_cast<T*>(smem + L::p) + warp * 16 * kLd16;            // (Z P)^T
  T* dst = reinterpret_cast<T*>(smem + L::ds) + warp * 16 * kLd16;          // dS^T
  float* slse = reinterpret_cast<float*>(smem + L::row0);
  float* sD = reinterpret_cast<float*>(smem + L::row1);
  float* slive = reinterpret_cast<float*>(smem + L::row2);
  const int b = blockIdx.z, h = blockIdx.y, j0 = blockIdx.x * kBlock;
  const long long head = static_cast<long long>(b) * s.T * s.C + static_cast<long long>(h) * kHS;
  const float* lse_bh = lse + (static_cast<long long>(b) * s.NH + h) * s.T;
  load_rows(sk, k, head, j0, s.T, s.C);
  load_rows(sv, v, head, j0, s.T, s.C);
  for (int r = threadIdx.x; r < kBlock; r += blockDim.x) {
    slive[r] = j0 + r < s.T && attends(key_mask, s, b, j0 + r) ? 1.0f : 0.0f;
  }
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> dk_acc[4], dv_acc[4];
  for (int n = 0; n < 4; ++n) {
    wmma::fill_fragment(dk_acc[n], 0.0f);
    wmma::fill_fragment(dv_acc[n], 0.0f);
  }
  const int r = lane / 2, c0 = (lane % 2) * 32;  // key row r of the warp; 32 of the 64 queries
  const int j = j0 + warp * 16 + r;
  for (int i0 = 0; i0 < s.T; i0 += kStep) {
    __syncthreads();
    load_rows(sq, q, head, i0, s.T, s.C);
    load_rows(sdo, dout, head, i0, s.T, s.C);
    load_delta(sD, dout, out, head, i0, s.T, s.C);
    for (int x = threadIdx.x; x < kStep; x += blockDim.x) slse[x] = i0 + x < s.T ? lse_bh[i0 + x] : -INFINITY;
    __syncthreads();
    mma_transposed(st, sk + warp * 16 * kLd16, sq);    // S^T = K_w Q^T
    mma_transposed(dpt, sv + warp * 16 * kLd16, sdo);  // dP^T = V_w dO^T
    __syncwarp();
    const bool key_live = slive[warp * 16 + r] != 0.0f;
    for (int c = c0; c < c0 + 32; ++c) {
      const int i = i0 + c;
      float p = 0.0f, z = 1.0f;
      if (key_live && slse[c] != -INFINITY) {
        p = expf(st[r * kLd32 + c] * s.scale - slse[c]);
        if (s.dropout_p > 0.0f) z = kept(s, b, h, i, j) ? s.keep_scale : 0.0f;
      }
      pt[r * kLd16 + c] = from_float<T>(z * p);
      dst[r * kLd16 + c] = from_float<T>(p * (z * dpt[r * kLd32 + c] - sD[c]) * s.scale);
    }
    __syncwarp();
    mma_accumulate(dv_acc, pt, sdo);  // dV_w += (Z P)^T dO
    mma_accumulate(dk_acc, dst, sq);  // dK_w += dS^T Q
  }
  __syncthreads();
  // The S^T and dP^T areas are free now: they stage the sums on their way to global memory.
  add_to_global(dk, dk_acc, st, head, j0 + warp * 16, s.T, s.C);
  __syncwarp();
  add_to_global(dv, dv_acc, st, head, j0 + warp * 16, s.T, s.C);
}

template <class T>
__global__ void __launch_bounds__(128) dq_mma_kernel(T* dq, const T* dout, const T* out, const float* lse, const T* q,
                                                     const T* k, const T* v, const T* key_mask, Shape s) {
  extern __shared__ __align__(128) unsigned char smem[];
  using L = BackwardLayout;
  T* sq = reinterpret_cast<T*>(smem + L::a);
  T* sdo = reinterpret_cast<T*>(smem + L::b);
  T* sk = reinterpret_cast<T*>(smem + L::x);
  T* sv = reinterpret_cast<T*>(smem + L::y);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* ss = reinterpret_cast<float*>(smem + L::s) + warp * 16 * kLd32;    // S [16 queries][64 keys]
  float* sdp = reinterpret_cast<float*>(smem + L::dp) + warp * 16 * kLd32;  // dP
  T* sds = reinterpret_cast<T*>(smem + L::ds) + warp * 16 * kLd16;          // dS
  float* slive = reinterpret_cast<float*>(smem + L::row0);
  float* sD = reinterpret_cast<float*>(smem + L::row2);
  float* slse = reinterpret_cast<float*>(smem + L::row3);
  const int b = blockIdx.z, h = blockIdx.y, i0 = blockIdx.x * kBlock;
  const long long head = static_cast<long long>(b) * s.T * s.C + static_cast<long long>(h) * kHS;
  const float* lse_bh = lse + (static_cast<long long>(b) * s.NH + h) * s.T;
  load_rows(sq, q, head, i0, s.T, s.C);
  load_rows(sdo, dout, head, i0, s.T, s.C);
  load_delta(sD, dout, out, head, i0, s.T, s.C);
  for (int x = threadIdx.x; x < kBlock; x += blockDim.x) slse[x] = i0 + x < s.T ? lse_bh[i0 + x] : -INFINITY;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> dq_acc[4];
  for (int n = 0; n < 4; ++n) wmma::fill_fragment(dq_acc[n], 0.0f);
  const int r = lane / 2, c0 = (lane % 2) * 32;  // query row r of the warp; 32 of the 64 keys
  const int row = warp * 16 + r, i = i0 + row;
  for (int j0 = 0; j0 < s.T; j0 += kStep) {
    __syncthreads();
    load_rows(sk, k, head, j0, s.T, s.C);
    load_rows(sv, v, head, j0, s.T, s.C);
    for (int x = threadIdx.x; x < kStep; x += blockDim.x) {
      slive[x] = j0 + x < s.T && attends(key_mask, s, b, j0 + x) ? 1.0f : 0.0f;
    }
    __syncthreads();
    mma_transposed(ss, sq + warp * 16 * kLd16, sk);    // S = Q_w K^T
    mma_transposed(sdp, sdo + warp * 16 * kLd16, sv);  // dP = dO_w V^T
    __syncwarp();
    std::uint64_t cached_block = ~std::uint64_t{0};
    r123::Philox4x32::ctr_type words{};
    const std::uint64_t row_element =
        s.first_element + (static_cast<std::uint64_t>(h) * s.T + i) * static_cast<std::uint64_t>(s.T);
    for (int c = c0; c < c0 + 32; ++c) {
      float ds = 0.0f;
      if (i < s.T && slse[row] != -INFINITY && slive[c] != 0.0f) {
        const float p = expf(ss[r * kLd32 + c] * s.scale - slse[row]);
        float z = 1.0f;
        if (s.dropout_p > 0.0f) {
          const std::uint64_t e = row_element + j0 + c;
          if ((e >> 2) != cached_block) {
            cached_block = e >> 2;
            words = philox_block(s.k0, s.k1, s.first_sample + b, cached_block);
          }
          z = (words[e & 3] & 0xffffff00u) >= s.threshold ? s.keep_scale : 0.0f;
        }
        ds = p * (z * sdp[r * kLd32 + c] - sD[row]) * s.scale;
      }
      sds[r * kLd16 + c] = from_float<T>(ds);
    }
    __syncwarp();
    mma_accumulate(dq_acc, sds, sk);  // dQ_w += dS K
  }
  __syncthreads();
  add_to_global(dq, dq_acc, ss, head, i0 + warp * 16, s.T, s.C);
}

}  // namespace

template <class T>
void backward_mma(const KernelContext& ctx, T* dq, T* dk, T* dv, const T* dout, const T* out, const float* lse,
                  const T* q, const T* k, const T* v, const T* key_mask, const Shape& s) {
  static const cudaError_t opted_kv =
      cudaFuncSetAttribute(dkdv_mma_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, BackwardLayout::bytes);
  static const cudaError_t opted_q =
      cudaFuncSetAttribute(dq_mma_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, BackwardLayout::bytes);
  MEMTRAIN_CUDA_CHECK(opted_kv);
  MEMTRAIN_CUDA_CHECK(opted_q);
  const dim3 grid((s.T + kBlock - 1) / kBlock, s.NH, s.B);
  dkdv_mma_kernel<T><<<grid, 128, BackwardLayout::bytes, ctx.stream>>>(dk, dv, dout, out, lse, q, k, v, key_mask, s);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
  dq_mma_kernel<T><<<grid, 128, BackwardLayout::bytes, ctx.stream>>>(dq, dout, out, lse, q, k, v, key_mask, s);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

template void backward_mma<__nv_bfloat16>(const KernelContext&, __nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*,
                                          const __nv_bfloat16*, const __nv_bfloat16*, const float*,
                                          const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                                          const __nv_bfloat16*, const Shape&);
template void backward_mma<__half>(const KernelContext&, __half*, __half*, __half*, const __half*, const __half*,
                                   const float*, const __half*, const __half*, const __half*, const __half*,
                                   const Shape&);

}  // namespace memtrain::kernels::gpu::flash
