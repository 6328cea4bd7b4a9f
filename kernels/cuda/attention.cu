#include "kernels/cuda/attention.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <stdexcept>
#include <string>

#include "kernels/cpu/attention.hpp"
#include "kernels/cuda/dropout.hpp"
#include "kernels/cuda/matmul.hpp"
#include "kernels/cuda/softmax.hpp"

namespace memtrain::kernels::gpu {
namespace {

void check_arguments(const char* fn, const KernelContext& ctx, int B, int T, int C, int NH, float dropout_p,
                     std::size_t element_bytes) {
  kernels::check_attention_arguments(fn, C, NH, dropout_p);
  const std::size_t need = attention_scratch_bytes(B, T, NH, dropout_p, element_bytes);
  if (ctx.scratch_bytes < need) {
    throw std::invalid_argument(std::string(fn) + ": scratch of " + std::to_string(ctx.scratch_bytes) +
                                " bytes; needs " + std::to_string(need));
  }
}

}  // namespace

// Note [Attention scores in fp32]
// With 16-bit operands the scores Q K^T / sqrt(HS) used to be written in the storage type
// before the softmax. Rounding a score of 4 to bf16 moves it by up to 2^-7, its exponential by
// 0.8%, and the first H200 run measured the output 1.2e-2 away from the exact result, past
// issue 14's bf16 bound of 1e-2 (PyTorch's eager attention rounds the same way; fused kernels
// do not). So the scores of bf16/fp16 attention go to an fp32 [B, NH, T, T] buffer in
// ctx.scratch (cuBLASLt writes fp32 from 16-bit inputs), and the softmax reads them there and
// writes the probabilities in the storage type. The dropped probabilities then reuse that
// scratch: the scores are dead by then.
std::size_t attention_scratch_bytes(int B, int T, int NH, float dropout_p, std::size_t element_bytes) {
  const std::size_t elements = static_cast<std::size_t>(B) * NH * T * T;
  const std::size_t scores = element_bytes < 4 ? elements * 4 : 0;
  const std::size_t dropped = dropout_p > 0.0f ? elements * element_bytes : 0;
  return std::max(scores, dropped);
}

template <class T>
void attention_forward(const KernelContext& ctx, T* out, T* probs, const T* q, const T* k, const T* v,
                       const T* key_mask, int B, int T_, int C, int NH, float dropout_p, const RngKey& key,
                       std::uint64_t first_sample, int first_head) {
  check_arguments("attention_forward", ctx, B, T_, C, NH, dropout_p, sizeof(T));
  const int HS = C / NH;
  const long long TT = static_cast<long long>(T_) * T_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  // scores of sample b, head h: probs[b, h] [T, T] = scale Q_h [T, HS] K_h^T, rows of Q_h and
  // K_h C apart and head h at column h HS.
  constexpr bool f32_scores = !std::is_same_v<T, float>;  // Note [Attention scores in fp32]
  auto* scores = static_cast<float*>(ctx.scratch);
  for (int b = 0; b < B; ++b) {
    const long long head0 = static_cast<long long>(b) * T_ * C;
    if constexpr (f32_scores) {
      matmul_strided_batched_f32_out<T>(ctx, scores + b * NH * TT, q + head0, k + head0, NH, T_, T_, HS, false, true,
                                        HS, HS, TT, C, C, T_, scale);
    } else {
      matmul_strided_batched<T>(ctx, probs + b * NH * TT, q + head0, k + head0, NH, T_, T_, HS, false, true, HS, HS, TT,
                                C, C, T_, scale, 0.0f);
    }
  }
  // The T query rows of every head of sample b share key_mask[b]: NH T rows per mask row.
  if constexpr (f32_scores) {
    masked_softmax_forward_from_f32<T>(ctx, probs, scores, key_mask, B * NH * T_, T_, NH * T_, 1.0f);
  } else {
    masked_softmax_forward<T>(ctx, probs, probs, key_mask, B * NH * T_, T_, NH * T_, 1.0f);
  }
  const T* used = probs;
  if (dropout_p > 0.0f) {
    // [B, NH T T] with sample b's elements numbered ((first_head + h) T + i) T + j.
    T* dropped = static_cast<T*>(ctx.scratch);
    dropout_forward<T>(ctx, dropped, probs, B, NH * TT, dropout_p, key, first_sample,
                       static_cast<std::uint64_t>(first_head) * TT);
    used = dropped;
  }
  for (int b = 0; b < B; ++b) {
    const long long head0 = static_cast<long long>(b) * T_ * C;
    // out_h [T, HS] = P_h [T, T] V_h [T, HS]
    matmul_strided_batched<T>(ctx, out + head0, used + b * NH * TT, v + head0, NH, T_, HS, T_, false, false, TT, HS, HS,
                              T_, C, C, 1.0f, 0.0f);
  }
}

template <class T>
void attention_backward(const KernelContext& ctx, T* dq, T* dk, T* dv, T* scratch, const T* dout, const T* probs,
                        const T* q, const T* k, const T* v, int B, int T_, int C, int NH, float dropout_p,
                        const RngKey& key, std::uint64_t first_sample, int first_head) {
  check_arguments("attention_backward", ctx, B, T_, C, NH, dropout_p, sizeof(T));
  const int HS = C / NH;
  const long long TT = static_cast<long long>(T_) * T_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  const std::uint64_t first_element = static_cast<std::uint64_t>(first_head) * TT;
  const T* used = probs;
  if (dropout_p > 0.0f) {
    T* dropped = static_cast<T*>(ctx.scratch);
    dropout_forward<T>(ctx, dropped, probs, B, NH * TT, dropout_p, key, first_sample, first_element);
    used = dropped;
  }
  for (int b = 0; b < B; ++b) {
    const long long head0 = static_cast<long long>(b) * T_ * C;
    // S_h [T, T] = dout_h [T, HS] V_h^T: the gradient of the dropped probabilities
    matmul_strided_batched<T>(ctx, scratch + b * NH * TT, dout + head0, v + head0, NH, T_, T_, HS, false, true, HS, HS,
                              TT, C, C, T_, 1.0f, 0.0f);
    // dV_h [T, HS] += dropout(P_h)^T dout_h
    matmul_strided_batched<T>(ctx, dv + head0, used + b * NH * TT, dout + head0, NH, T_, HS, T_, true, false, TT, HS,
                              HS, T_, C, C, 1.0f, 1.0f);
  }
  if (dropout_p > 0.0f) {
    dropout_backward<T>(ctx, scratch, scratch, B, NH * TT, dropout_p, key, first_sample, first_element);
  }
  masked_softmax_backward<T>(ctx, scratch, scratch, probs, B * NH * T_, T_, 1.0f);
  for (int b = 0; b < B; ++b) {
    const long long head0 = static_cast<long long>(b) * T_ * C;
    // dQ_h += scale S_h K_h; dK_h += scale S_h^T Q_h
    matmul_strided_batched<T>(ctx, dq + head0, scratch + b * NH * TT, k + head0, NH, T_, HS, T_, false, false, TT, HS,
                              HS, T_, C, C, scale, 1.0f);
    matmul_strided_batched<T>(ctx, dk + head0, scratch + b * NH * TT, q + head0, NH, T_, HS, T_, true, false, TT, HS,
                              HS, T_, C, C, scale, 1.0f);
  }
}

#define MEMTRAIN_INSTANTIATE(T)                                                                                      \
  template void attention_forward<T>(const KernelContext&, T*, T*, const T*, const T*, const T*, const T*, int, int, \
                                     int, int, float, const RngKey&, std::uint64_t, int);                            \
  template void attention_backward<T>(const KernelContext&, T*, T*, T*, T*, const T*, const T*, const T*, const T*,  \
                                      const T*, int, int, int, int, float, const RngKey&, std::uint64_t, int);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(__nv_bfloat16)
MEMTRAIN_INSTANTIATE(__half)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels::gpu
