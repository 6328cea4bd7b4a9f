#include "kernels/cuda/dropout.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cpu/dropout.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/dtype_traits.cuh"
#include "kernels/cuda/philox_device.cuh"

namespace memtrain::kernels::gpu {
namespace {

// One thread per 4 consecutive elements of a row that share a Philox block, so each block's
// ten rounds are computed once (the CPU draws whole blocks too).
template <class T>
__global__ void dropout_kernel(T* out, const T* inp, const T* residual, int rows, long per_sample, float scale,
                               std::uint32_t threshold, std::uint32_t k0, std::uint32_t k1, std::uint64_t first_sample,
                               std::uint64_t first_element) {
  // Blocks of the sample's element index that this row touches: [e0 >> 2, (e0 + n - 1) >> 2].
  const std::uint64_t first_block = first_element >> 2;
  const long long blocks_per_row = static_cast<long long>(((first_element + per_sample - 1) >> 2) - first_block + 1);
  const long long total = blocks_per_row * rows;
  for (long long t = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long r = t / blocks_per_row;
    const std::uint64_t block = first_block + static_cast<std::uint64_t>(t % blocks_per_row);
    const std::uint64_t sample = first_sample + static_cast<std::uint64_t>(r);
    const auto words = philox_block(k0, k1, sample, block);
    for (int lane = 0; lane < 4; ++lane) {
      const std::uint64_t e = block * 4 + lane;
      if (e < first_element || e >= first_element + per_sample) continue;
      const long long i = r * per_sample + static_cast<long long>(e - first_element);
      const bool keep = (words[lane] & 0xffffff00u) >= threshold;
      if (residual == nullptr) {
        out[i] = keep ? from_float<T>(to_float(inp[i]) * scale) : from_float<T>(0.0f);
      } else {
        // __fmul_rn / __fadd_rn: never contracted into an FMA, so each rounds as the CPU's does.
        const float dropped = keep ? __fmul_rn(to_float(inp[i]), scale) : 0.0f;
        out[i] = from_float<T>(__fadd_rn(dropped, to_float(residual[i])));
      }
    }
  }
}

// Queues dropout_kernel over [rows, per_sample]: one thread per Philox block of each row.
template <class T>
void launch_dropout(const KernelContext& ctx, T* out, const T* inp, const T* residual, int rows, long per_sample,
                    float scale, std::uint32_t threshold, const RngKey& key, std::uint64_t first_sample,
                    std::uint64_t first_element) {
  const long long total = static_cast<long long>(rows) * per_sample;
  const auto k = PhiloxStream(key).key_words();
  const long long threads = (total + 3) / 4 + rows;  // whole blocks per row, rounded up
  dropout_kernel<<<blocks_for(threads, 256), 256, 0, ctx.stream>>>(out, inp, residual, rows, per_sample, scale,
                                                                   threshold, k[0], k[1], first_sample, first_element);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

template <class T>
void dropout(const KernelContext& ctx, T* out, const T* inp, int rows, long per_sample, float p, const RngKey& key,
             std::uint64_t first_sample, std::uint64_t first_element, const char* who) {
  if (!(p >= 0.0f)) {
    throw std::invalid_argument(std::string(who) + ": p = " + std::to_string(p) + "; expected a probability in [0, 1)");
  }
  const long long total = static_cast<long long>(rows) * per_sample;
  if (total == 0) return;
  if (p == 0.0f) {
    if (out != inp) {
      MEMTRAIN_CUDA_CHECK(cudaMemcpyAsync(out, inp, sizeof(T) * total, cudaMemcpyDeviceToDevice, ctx.stream));
    }
    return;
  }
  if (p >= 1.0f) {
    MEMTRAIN_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(T) * total, ctx.stream));
    return;
  }
  // The CPU scales in T; for 16-bit T it computes in f32 views, so f32 here is the same.
  const float scale = 1.0f / (1.0f - p);
  launch_dropout<T>(ctx, out, inp, nullptr, rows, per_sample, scale, dropout_keep_threshold(p), key, first_sample,
                    first_element);
}

}  // namespace

template <class T>
void dropout_forward(const KernelContext& ctx, T* out, const T* inp, int rows, long per_sample, float p,
                     const RngKey& key, std::uint64_t first_sample, std::uint64_t first_element) {
  dropout(ctx, out, inp, rows, per_sample, p, key, first_sample, first_element, "dropout_forward");
}

template <class T>
void dropout_backward(const KernelContext& ctx, T* dinp, const T* dout, int rows, long per_sample, float p,
                      const RngKey& key, std::uint64_t first_sample, std::uint64_t first_element) {
  // d(x keep scale)/dx = keep scale: the same masked scaling of the gradient.
  dropout(ctx, dinp, dout, rows, per_sample, p, key, first_sample, first_element, "dropout_backward");
}

template <class T>
void dropout_residual_forward(const KernelContext& ctx, T* out, const T* inp, const T* residual, int rows,
                              long per_sample, float p, const RngKey& key, std::uint64_t first_sample,
                              std::uint64_t first_element) {
  if (!(p >= 0.0f && p < 1.0f)) {
    throw std::invalid_argument("dropout_residual_forward: p = " + std::to_string(p) +
                                "; expected a probability in [0, 1)");
  }
  const long long total = static_cast<long long>(rows) * per_sample;
  if (total == 0) return;
  // p == 0 keeps every element (threshold 0) at scale 1: the plain sum.
  const float scale = p > 0.0f ? 1.0f / (1.0f - p) : 1.0f;
  const std::uint32_t threshold = p > 0.0f ? dropout_keep_threshold(p) : 0u;
  launch_dropout<T>(ctx, out, inp, residual, rows, per_sample, scale, threshold, key, first_sample, first_element);
}

#define MEMTRAIN_INSTANTIATE(T)                                                                                        \
  template void dropout_forward<T>(const KernelContext&, T*, const T*, int, long, float, const RngKey&, std::uint64_t, \
                                   std::uint64_t);                                                                     \
  template void dropout_backward<T>(const KernelContext&, T*, const T*, int, long, float, const RngKey&,               \
                                    std::uint64_t, std::uint64_t);                                                     \
  template void dropout_residual_forward<T>(const KernelContext&, T*, const T*, const T*, int, long, float,            \
                                            const RngKey&, std::uint64_t, std::uint64_t);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(__nv_bfloat16)
MEMTRAIN_INSTANTIATE(__half)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels::gpu
