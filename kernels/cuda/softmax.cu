#include "kernels/cuda/softmax.hpp"

#include <cfloat>

#include "kernels/cuda/column_reduce.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/dtype_traits.cuh"

namespace memtrain::kernels::gpu {
namespace {

constexpr int kWarpsPerBlock = 8;

template <class T, class In>
__global__ void softmax_forward_kernel(T* out, const In* inp, const T* key_mask, int rows, int cols, int rows_per_mask,
                                       float scale) {
  const int r = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  const In* x = inp + static_cast<long long>(r) * cols;
  T* y = out + static_cast<long long>(r) * cols;
  // rows_per_mask < 1 means one mask row per row, as on the CPU (kernels/cpu/softmax.cpp).
  const int per_mask = rows_per_mask > 0 ? rows_per_mask : 1;
  const T* mask = key_mask != nullptr ? key_mask + static_cast<long long>(r / per_mask) * cols : nullptr;
  const auto attended = [&](int j) { return mask == nullptr || to_float(mask[j]) != 0.0f; };
  float m = -FLT_MAX;
  bool any = false;
  for (int j = lane; j < cols; j += 32) {
    if (attended(j)) {
      m = fmaxf(m, scale * to_float(x[j]));
      any = true;
    }
  }
  m = warp_max(m);
  any = __any_sync(0xffffffffu, any);
  float s = 0.0f;
  for (int j = lane; j < cols; j += 32) {
    if (attended(j)) s += expf(scale * to_float(x[j]) - m);
  }
  s = warp_sum(s);
  const float inv = any ? 1.0f / s : 0.0f;
  // Read every input before writing: out may alias inp, and lane j reads only column j.
  for (int j = lane; j < cols; j += 32) {
    y[j] = from_float<T>(attended(j) && any ? expf(scale * to_float(x[j]) - m) * inv : 0.0f);
  }
}

template <class T>
__global__ void softmax_backward_kernel(T* dinp, const T* dout, const T* probs, int rows, int cols, float scale) {
  const int r = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  const long long base = static_cast<long long>(r) * cols;
  float dot = 0.0f;
  for (int j = lane; j < cols; j += 32) dot += to_float(dout[base + j]) * to_float(probs[base + j]);
  dot = warp_sum(dot);
  for (int j = lane; j < cols; j += 32) {
    const float p = to_float(probs[base + j]);
    dinp[base + j] = from_float<T>(scale * p * (to_float(dout[base + j]) - dot));
  }
}

}  // namespace

template <class T>
void masked_softmax_forward(const KernelContext& ctx, T* out, const T* inp, const T* key_mask, int rows, int cols,
                            int rows_per_mask, float scale) {
  if (rows == 0 || cols == 0) return;
  softmax_forward_kernel<T, T><<<(rows + kWarpsPerBlock - 1) / kWarpsPerBlock, 32 * kWarpsPerBlock, 0, ctx.stream>>>(
      out, inp, key_mask, rows, cols, rows_per_mask, scale);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

template <class T>
void masked_softmax_forward_from_f32(const KernelContext& ctx, T* out, const float* scores, const T* key_mask, int rows,
                                     int cols, int rows_per_mask, float scale) {
  if (rows == 0 || cols == 0) return;
  softmax_forward_kernel<T, float>
      <<<(rows + kWarpsPerBlock - 1) / kWarpsPerBlock, 32 * kWarpsPerBlock, 0, ctx.stream>>>(
          out, scores, key_mask, rows, cols, rows_per_mask, scale);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

template <class T>
void masked_softmax_backward(const KernelContext& ctx, T* dinp, const T* dout, const T* probs, int rows, int cols,
                             float scale) {
  if (rows == 0 || cols == 0) return;
  softmax_backward_kernel<<<(rows + kWarpsPerBlock - 1) / kWarpsPerBlock, 32 * kWarpsPerBlock, 0, ctx.stream>>>(
      dinp, dout, probs, rows, cols, scale);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

#define MEMTRAIN_INSTANTIATE(T)                                                                                     \
  template void masked_softmax_forward<T>(const KernelContext&, T*, const T*, const T*, int, int, int, float);      \
  template void masked_softmax_backward<T>(const KernelContext&, T*, const T*, const T*, int, int, float);          \
  template void masked_softmax_forward_from_f32<T>(const KernelContext&, T*, const float*, const T*, int, int, int, \
                                                   float);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(__nv_bfloat16)
MEMTRAIN_INSTANTIATE(__half)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels::gpu
