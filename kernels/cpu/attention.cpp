#include "kernels/cpu/attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/dropout.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/cpu/softmax.hpp"

namespace memtrain::kernels {

void check_attention_arguments(const char* fn, int C, int NH, float dropout_p) {
  if (!(dropout_p >= 0.0f && dropout_p < 1.0f)) {
    throw std::invalid_argument(std::string(fn) + ": dropout_p = " + std::to_string(dropout_p) +
                                "; expected a probability in [0, 1)");
  }
  if (NH <= 0 || C % NH != 0) {
    throw std::invalid_argument(std::string(fn) + ": num_attention_heads = " + std::to_string(NH) +
                                " does not divide hidden_size = " + std::to_string(C));
  }
}

namespace {

// Below this many multiply-adds per call (B * NH * T * T * HS) waking a thread team costs more
// than the work, and spinning OpenMP threads hurt a loaded machine; such calls run serially.
constexpr std::int64_t kParallelWork = 1 << 16;

// Elements of the per-thread stack buffer holding dropped probability rows (64 KiB in float).
constexpr int kDropBuffer = 16384;

void check_arguments(const char* fn, int T, int C, int NH, float dropout_p) {
  check_attention_arguments(fn, C, NH, dropout_p);
  if (T > kDropBuffer) {
    throw std::invalid_argument(std::string(fn) + ": sequence length T = " + std::to_string(T) +
                                "; expected T <= " + std::to_string(kDropBuffer));
  }
}

// P [T, T] = softmax(Q_h K_h^T / sqrt(HS) + mask) of one (b, h): the only code that computes
// probabilities, so attention_probs reproduces attention_forward's bit for bit.
template <class Scalar>
void head_probs(Scalar* P, const Scalar* qb, const Scalar* kb, const Scalar* mask, int T, int C, int HS, Scalar scale) {
  matmul_strided_batched(P, qb, kb, 1, T, T, HS, false, true, 0, 0, 0, C, C, T, scale, Scalar(0));
  for (int i = 0; i < T; ++i) {
    detail::masked_softmax_row(P + static_cast<std::int64_t>(i) * T, P + i * T, mask, T, Scalar(1));
  }
}

}  // namespace

template <class Scalar>
void attention_probs(Scalar* probs, const Scalar* q, const Scalar* k, const NoDeduce<Scalar>* key_mask, int B, int T,
                     int C, int NH) {
  check_arguments("attention_probs", T, C, NH, 0.0f);
  const int HS = C / NH;
  const Scalar scale = Scalar(1) / std::sqrt(Scalar(HS));
  const std::int64_t TT = static_cast<std::int64_t>(T) * T;
  const bool parallel = static_cast<std::int64_t>(B) * NH * TT * HS >= kParallelWork;
  SerialBlasScope serial_blas;  // Note [OpenBLAS inside OpenMP loops]
  detail::parallel_for(B * NH, parallel, [=](std::int64_t task) {
    const int bh = static_cast<int>(task);
    const int b = bh / NH, h = bh % NH;
    const std::int64_t head = static_cast<std::int64_t>(b) * T * C + h * HS;
    const Scalar* mask = key_mask ? key_mask + static_cast<std::int64_t>(b) * T : nullptr;  // [T]
    head_probs(probs + bh * TT, q + head, k + head, mask, T, C, HS, scale);
  });
}

template <class Scalar>
void attention_forward(Scalar* out, Scalar* probs, const Scalar* q, const Scalar* k, const Scalar* v,
                       const NoDeduce<Scalar>* key_mask, int B, int T, int C, int NH, float dropout_p,
                       const RngKey& key, std::uint64_t first_sample, int first_head) {
  check_arguments("attention_forward", T, C, NH, dropout_p);
  const int HS = C / NH;
  const Scalar scale = Scalar(1) / std::sqrt(Scalar(HS));
  const std::int64_t TT = static_cast<std::int64_t>(T) * T;
  const PhiloxStream stream(key);
  const bool drop = dropout_p > 0.0f;
  const bool parallel = static_cast<std::int64_t>(B) * NH * TT * HS >= kParallelWork;
  SerialBlasScope serial_blas;  // Note [OpenBLAS inside OpenMP loops]
  detail::parallel_for(B * NH, parallel, [=](std::int64_t task) {
    const int bh = static_cast<int>(task);
    const int b = bh / NH, h = bh % NH;
    const std::int64_t head = static_cast<std::int64_t>(b) * T * C + h * HS;
    const Scalar* qb = q + head;                                                            // [T, HS], row stride C
    const Scalar* kb = k + head;                                                            // [T, HS], row stride C
    const Scalar* vb = v + head;                                                            // [T, HS], row stride C
    Scalar* ob = out + head;                                                                // [T, HS], row stride C
    Scalar* P = probs + bh * TT;                                                            // [T, T]
    const Scalar* mask = key_mask ? key_mask + static_cast<std::int64_t>(b) * T : nullptr;  // [T]
    head_probs(P, qb, kb, mask, T, C, HS, scale);
    if (!drop) {
      // out = P V
      matmul_strided_batched(ob, P, vb, 1, T, HS, T, false, false, 0, 0, 0, T, C, C, Scalar(1), Scalar(0));
      return;
    }
    // out = dropout(P) V, a block of rows at a time through the stack buffer, so that P keeps
    // the pre-dropout probabilities the backward pass needs.
    alignas(64) Scalar buf[kDropBuffer];  // [R, T]
    const int R = std::min(T, kDropBuffer / T);
    for (int i0 = 0; i0 < T; i0 += R) {
      const int rows = std::min(R, T - i0);
      std::memcpy(buf, P + static_cast<std::int64_t>(i0) * T, sizeof(Scalar) * rows * T);
      apply_dropout_mask(buf, static_cast<std::int64_t>(rows) * T, dropout_p, stream, first_sample + b,
                         (static_cast<std::uint64_t>(first_head + h) * T + i0) * T);
      matmul_strided_batched(ob + static_cast<std::int64_t>(i0) * C, buf, vb, 1, rows, HS, T, false, false, 0, 0, 0, T,
                             C, C, Scalar(1), Scalar(0));
    }
  });
}

template <class Scalar>
void attention_backward(Scalar* dq, Scalar* dk, Scalar* dv, Scalar* scratch, const Scalar* dout, const Scalar* probs,
                        const Scalar* q, const Scalar* k, const Scalar* v, int B, int T, int C, int NH, float dropout_p,
                        const RngKey& key, std::uint64_t first_sample, int first_head) {
  check_arguments("attention_backward", T, C, NH, dropout_p);
  const int HS = C / NH;
  const Scalar scale = Scalar(1) / std::sqrt(Scalar(HS));
  const std::int64_t TT = static_cast<std::int64_t>(T) * T;
  const PhiloxStream stream(key);
  const bool drop = dropout_p > 0.0f;
  const bool parallel = static_cast<std::int64_t>(B) * NH * TT * HS >= kParallelWork;
  SerialBlasScope serial_blas;  // Note [OpenBLAS inside OpenMP loops]
  detail::parallel_for(B * NH, parallel, [=](std::int64_t task) {
    const int bh = static_cast<int>(task);
    const int b = bh / NH, h = bh % NH;
    const std::int64_t head = static_cast<std::int64_t>(b) * T * C + h * HS;
    const std::uint64_t first_element = static_cast<std::uint64_t>(first_head + h) * TT;
    const Scalar* P = probs + bh * TT;  // [T, T]
    Scalar* S = scratch + bh * TT;      // [T, T]
    // S = dout V^T, the gradient of the dropped probabilities.
    matmul_strided_batched(S, dout + head, v + head, 1, T, T, HS, false, true, 0, 0, 0, C, C, T, Scalar(1), Scalar(0));
    if (!drop) {
      // dV += P^T dout
      matmul_strided_batched(dv + head, P, dout + head, 1, T, HS, T, true, false, 0, 0, 0, T, C, C, Scalar(1),
                             Scalar(1));
    } else {
      // dV += dropout(P)^T dout and S through dropout, a block of rows at a time: both take the
      // same mask, whose Philox words are drawn once for the pair (one block of all T rows
      // when T * T fits the buffer, as at T <= 128, so dV is then one product as before).
      alignas(64) Scalar buf[kDropBuffer];  // [R, T]
      const int R = std::min(T, kDropBuffer / T);
      for (int i0 = 0; i0 < T; i0 += R) {
        const int rows = std::min(R, T - i0);
        const std::int64_t at = static_cast<std::int64_t>(i0) * T;
        std::memcpy(buf, P + at, sizeof(Scalar) * rows * T);
        apply_dropout_mask_pair(buf, S + at, static_cast<std::int64_t>(rows) * T, dropout_p, stream, first_sample + b,
                                first_element + static_cast<std::uint64_t>(at));
        matmul_strided_batched(dv + head, buf, dout + head + static_cast<std::int64_t>(i0) * C, 1, T, HS, rows, true,
                               false, 0, 0, 0, T, C, C, Scalar(1), Scalar(1));
      }
    }
    for (int i = 0; i < T; ++i) {
      detail::softmax_backward_row(S + static_cast<std::int64_t>(i) * T, S + i * T, P + i * T, T, Scalar(1));
    }
    // dQ += S K / sqrt(HS); dK += S^T Q / sqrt(HS)
    matmul_strided_batched(dq + head, S, k + head, 1, T, HS, T, false, false, 0, 0, 0, T, C, C, scale, Scalar(1));
    matmul_strided_batched(dk + head, S, q + head, 1, T, HS, T, true, false, 0, 0, 0, T, C, C, scale, Scalar(1));
  });
}

#define MEMTRAIN_INSTANTIATE(S)                                                                                        \
  template void attention_forward<S>(S*, S*, const S*, const S*, const S*, const S*, int, int, int, int, float,        \
                                     const RngKey&, std::uint64_t, int);                                               \
  template void attention_probs<S>(S*, const S*, const S*, const S*, int, int, int, int);                              \
  template void attention_backward<S>(S*, S*, S*, S*, const S*, const S*, const S*, const S*, const S*, int, int, int, \
                                      int, float, const RngKey&, std::uint64_t, int);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(double)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels
