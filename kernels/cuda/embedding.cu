#include "kernels/cuda/embedding.hpp"

#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/dtype_traits.cuh"

namespace memtrain::kernels::gpu {
namespace {

// bad[0] = first position whose id is outside [0, limit) (atomicMin: the smallest wins).
__global__ void check_ids_kernel(int* bad, const std::int32_t* ids, int n, int limit) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < n && (ids[r] < 0 || ids[r] >= limit)) atomicMin(bad, r);
}

void check_ids(const KernelContext& ctx, const std::int32_t* ids, int B, int T, int limit, const char* what) {
  if (ctx.scratch_bytes < 8) throw std::invalid_argument("bert_embeddings_forward: needs 8 bytes of scratch");
  const int n = B * T;
  int* bad = static_cast<int*>(ctx.scratch);
  MEMTRAIN_CUDA_CHECK(cudaMemcpyAsync(bad, &n, sizeof n, cudaMemcpyHostToDevice, ctx.stream));
  check_ids_kernel<<<(n + 255) / 256, 256, 0, ctx.stream>>>(bad, ids, n, limit);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
  int first = n;
  MEMTRAIN_CUDA_CHECK(cudaMemcpyAsync(&first, bad, sizeof first, cudaMemcpyDeviceToHost, ctx.stream));
  MEMTRAIN_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  if (first == n) return;
  std::int32_t id = 0;
  MEMTRAIN_CUDA_CHECK(cudaMemcpy(&id, ids + first, sizeof id, cudaMemcpyDeviceToHost));
  throw std::out_of_range(std::string("bert_embeddings_forward: ") + what + "[b=" + std::to_string(first / T) +
                          ", t=" + std::to_string(first % T) + "] = " + std::to_string(id) +
                          "; expected a value in [0, " + std::to_string(limit) + ")");
}

template <class T>
__global__ void embeddings_forward_kernel(T* out, const std::int32_t* ids, const std::int32_t* type_ids, const T* word,
                                          const T* pos, const T* type, int T_, int C, long long total) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long r = i / C;
    const int c = static_cast<int>(i % C);
    const int t = static_cast<int>(r % T_);
    const long long ty = type_ids != nullptr ? type_ids[r] : 0;
    // (w + p) + ty in fp32, rounded once to T (the CPU adds in T: the same for fp32).
    const float w = to_float(word[static_cast<long long>(ids[r]) * C + c]);
    out[i] = from_float<T>(
        __fadd_rn(__fadd_rn(w, to_float(pos[static_cast<long long>(t) * C + c])), to_float(type[ty * C + c])));
  }
}

__global__ void embeddings_backward_kernel(float* dword, float* dpos, float* dtype, const float* dout,
                                           const std::int32_t* ids, const std::int32_t* type_ids, int B, int T_,
                                           int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T_; ++t) {
      const long long r = static_cast<long long>(b) * T_ + t;
      const float g = dout[r * C + c];
      if (dword != nullptr) dword[static_cast<long long>(ids[r]) * C + c] += g;
      if (dpos != nullptr) dpos[static_cast<long long>(t) * C + c] += g;
      if (dtype != nullptr) dtype[static_cast<long long>(type_ids != nullptr ? type_ids[r] : 0) * C + c] += g;
    }
  }
}

}  // namespace

template <class T>
void bert_embeddings_forward(const KernelContext& ctx, T* out, const std::int32_t* ids, const std::int32_t* type_ids,
                             const T* word, const T* pos, const T* type, int B, int T_, int C, int V, int TV) {
  if (B == 0 || T_ == 0) return;
  check_ids(ctx, ids, B, T_, V, "input_ids");
  if (type_ids != nullptr) check_ids(ctx, type_ids, B, T_, TV, "token_type_ids");
  const long long total = static_cast<long long>(B) * T_ * C;
  if (total == 0) return;
  embeddings_forward_kernel<<<blocks_for(total, 256), 256, 0, ctx.stream>>>(out, ids, type_ids, word, pos, type, T_, C,
                                                                            total);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

void bert_embeddings_backward(const KernelContext& ctx, float* dword, float* dpos, float* dtype, const float* dout,
                              const std::int32_t* ids, const std::int32_t* type_ids, int B, int T_, int C) {
  if (B == 0 || T_ == 0 || C == 0) return;
  embeddings_backward_kernel<<<(C + 127) / 128, 128, 0, ctx.stream>>>(dword, dpos, dtype, dout, ids, type_ids, B, T_,
                                                                      C);
  MEMTRAIN_CUDA_CHECK_LAUNCH();
}

#define MEMTRAIN_INSTANTIATE(T)                                                                                \
  template void bert_embeddings_forward<T>(const KernelContext&, T*, const std::int32_t*, const std::int32_t*, \
                                           const T*, const T*, const T*, int, int, int, int, int);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(__nv_bfloat16)
MEMTRAIN_INSTANTIATE(__half)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels::gpu
