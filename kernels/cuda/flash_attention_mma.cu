#include "kernels/cuda/flash_attention_mma.cuh"

#include <mma.h>

#include <type_traits>

#include "kernels/cuda/cuda_check.hpp"

namespace memtrain::kernels::gpu::flash {
namespace {

using namespace nvcuda;

constexpr int kHS = kMmaHeadSize;
constexpr int kBlockRows = 64;  // query rows per block: 4 warps x 16
constexpr int kKeys = 64;       // keys per tile
constexpr int kLd16 = kMmaLd16;
constexpr int kLd32 = kMmaLd32;

struct SharedLayout {
  static constexpr int q = 0;                           // T [64][kLd16]
  static constexpr int k = q + kBlockRows * kLd16 * 2;  // T [64][kLd16]
  static constexpr int v = k + kKeys * kLd16 * 2;       // T [64][kLd16]
  static constexpr int s = v + kKeys * kLd16 * 2;       // float [4][16][kLd32]
  static constexpr int p = s + 4 * 16 * kLd32 * 4;      // T [4][16][kLd16]
  static constexpr int o = p + 4 * 16 * kLd16 * 2;      // float [4][16][kLd32]
  static constexpr int live = o + 4 * 16 * kLd32 * 4;   // bool [64]
  static constexpr int bytes = live + kKeys;
};

template <class T>
__global__ void __launch_bounds__(128)
    forward_mma_kernel(T* out, float* lse, const T* q, const T* k, const T* v, const T* key_mask, Shape s) {
  extern __shared__ __align__(128) unsigned char smem[];
  T* sq = reinterpret_cast<T*>(smem + SharedLayout::q);
  T* sk = reinterpret_cast<T*>(smem + SharedLayout::k);
  T* sv = reinterpret_cast<T*>(smem + SharedLayout::v);
  bool* live = reinterpret_cast<bool*>(smem + SharedLayout::live);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* ss = reinterpret_cast<float*>(smem + SharedLayout::s) + warp * 16 * kLd32;  // this warp's S [16][64]
  T* sp = reinterpret_cast<T*>(smem + SharedLayout::p) + warp * 16 * kLd16;          // its P [16][64]
  float* so = reinterpret_cast<float*>(smem + SharedLayout::o) + warp * 16 * kLd32;  // its O [16][64]
  const int b = blockIdx.z, h = blockIdx.y, i0 = blockIdx.x * kBlockRows;
  const long long head = static_cast<long long>(b) * s.T * s.C + static_cast<long long>(h) * kHS;

  for (int x = threadIdx.x; x < kBlockRows * kHS; x += blockDim.x) {
    const int r = x / kHS, d = x % kHS;
    sq[r * kLd16 + d] = i0 + r < s.T ? q[head + static_cast<long long>(i0 + r) * s.C + d] : from_float<T>(0.0f);
  }
  // Row r = lane / 2 of this warp's 16; each of its two lanes owns 32 of the 64 columns.
  const int r = lane / 2, c0 = (lane % 2) * 32;
  const int i = i0 + warp * 16 + r;
  for (int c = c0; c < c0 + 32; ++c) so[r * kLd32 + c] = 0.0f;
  float m = -INFINITY, l = 0.0f;

  for (int j0 = 0; j0 < s.T; j0 += kKeys) {
    __syncthreads();  // the previous tile's K and V are no longer read
    for (int x = threadIdx.x; x < kKeys * kHS; x += blockDim.x) {
      const int jj = x / kHS, d = x % kHS;
      const bool in = j0 + jj < s.T;
      const long long at = head + static_cast<long long>(j0 + jj) * s.C + d;
      sk[jj * kLd16 + d] = in ? k[at] : from_float<T>(0.0f);
      sv[jj * kLd16 + d] = in ? v[at] : from_float<T>(0.0f);
    }
    if (threadIdx.x < kKeys) live[threadIdx.x] = j0 + threadIdx.x < s.T && attends(key_mask, s, b, j0 + threadIdx.x);
    __syncthreads();

    // S [16, 64] = Q_w [16, 64] K_tile^T
    for (int nt = 0; nt < kKeys / 16; ++nt) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
      for (int kt = 0; kt < kHS / 16; ++kt) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> bk;
        wmma::load_matrix_sync(a, sq + (warp * 16) * kLd16 + kt * 16, kLd16);
        wmma::load_matrix_sync(bk, sk + (nt * 16) * kLd16 + kt * 16, kLd16);
        wmma::mma_sync(acc, a, bk, acc);
      }
      wmma::store_matrix_sync(ss + nt * 16, acc, kLd32, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax of row r over this tile (Dao et al. 2022, Algorithm 1, lines 9-12).
    float tile_max = -INFINITY;
    for (int c = c0; c < c0 + 32; ++c) {
      if (live[c]) tile_max = fmaxf(tile_max, ss[r * kLd32 + c] * s.scale);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    if (tile_max > -INFINITY) {
      const float m_new = fmaxf(m, tile_max);
      const float alpha = expf(m - m_new);  // 0 while m is -inf
      float sum = 0.0f;
      std::uint64_t cached_block = ~std::uint64_t{0};
      r123::Philox4x32::ctr_type words{};
      const std::uint64_t row_element =
          s.first_element + (static_cast<std::uint64_t>(h) * s.T + i) * static_cast<std::uint64_t>(s.T);
      for (int c = c0; c < c0 + 32; ++c) {
        float p = 0.0f;
        if (live[c] && i < s.T) {
          p = expf(ss[r * kLd32 + c] * s.scale - m_new);
          sum += p;
          if (s.dropout_p > 0.0f) {
            const std::uint64_t e = row_element + j0 + c;
            if ((e >> 2) != cached_block) {
              cached_block = e >> 2;
              words = philox_block(s.k0, s.k1, s.first_sample + b, cached_block);
            }
            p = (words[e & 3] & 0xffffff00u) >= s.threshold ? p * s.keep_scale : 0.0f;
          }
        }
        sp[r * kLd16 + c] = from_float<T>(p);
        so[r * kLd32 + c] *= alpha;
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      l = l * alpha + sum;
      m = m_new;
    } else {
      for (int c = c0; c < c0 + 32; ++c) sp[r * kLd16 + c] = from_float<T>(0.0f);
    }
    __syncwarp();

    // O_w [16, 64] += P [16, 64] V_tile [64, 64]
    for (int nt = 0; nt < kHS / 16; ++nt) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, so + nt * 16, kLd32, wmma::mem_row_major);
      for (int kt = 0; kt < kKeys / 16; ++kt) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> bv;
        wmma::load_matrix_sync(a, sp + kt * 16, kLd16);
        wmma::load_matrix_sync(bv, sv + (kt * 16) * kLd16 + nt * 16, kLd16);
        wmma::mma_sync(acc, a, bv, acc);
      }
      wmma::store_matrix_sync(so + nt * 16, acc, kLd32, wmma::mem_row_major);
    }
    __syncwarp();
  }
  if (i >= s.T) return;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int c = c0; c < c0 + 32; ++c)
    out[head + static_cast<long long>(i) * s.C + c] = from_float<T>(so[r * kLd32 + c] * inv);
  if (lane % 2 == 0) lse[(static_cast<long long>(b) * s.NH + h) * s.T + i] = l > 0.0f ? m + logf(l) : -INFINITY;
}

}  // namespace

template <class T>
bool mma_forward_applies(const Shape& s) {
  return !std::is_same_v<T, float> && s.HS == kHS;
}

template <class T>
void forward_mma(const KernelContext& ctx, T* out, float* lse, const T* q, const T* k, const T* v, const T* key_mask,
                 const Shape& s) {
  // Over the 48 KiB default: the kernel opts in to its 72 KiB of shared memory once.
  static const cudaError_t opted =
      cudaFuncSetAttribute(forward_mma_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, SharedLayout::bytes);
  MEMTRAIN_CUDA_CHECK(opted);
  const dim3 grid((s.T + kBlockRows - 1) / kBlockRows, s.NH, s.B);
  forward_mma_kernel<T><<<grid, 128, SharedLayout::bytes, ctx.stream>>>(out, lse, q, k, v, key_mask, s);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

template bool mma_forward_applies<float>(const Shape&);
template bool mma_forward_applies<__nv_bfloat16>(const Shape&);
template bool mma_forward_applies<__half>(const Shape&);
template void forward_mma<__nv_bfloat16>(const KernelContext&, __nv_bfloat16*, float*, const __nv_bfloat16*,
                                         const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                                         const Shape&);
template void forward_mma<__half>(const KernelContext&, __half*, float*, const __half*, const __half*, const __half*,
                                  const __half*, const Shape&);

}  // namespace memtrain::kernels::gpu::flash
