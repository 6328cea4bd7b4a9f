#include "kernels/cpu/flash_attention.hpp"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/cpu/dropout.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/parallel.hpp"

namespace memtrain::kernels {
namespace {

// Note [Flash attention tile size]
// A 64 x 64 score tile is 16 KiB in float; with the Q, K, V and dO blocks of a 64-wide head
// (4 x 16 KiB) and the backward pass's three tiles, one (i, j) step works in about 112 KiB,
// inside a core's L2.
// Larger tiles make the GEMMs more efficient but spill; smaller ones pay the per-tile
// rescaling and call overhead more often.
constexpr int kTile = 64;

// As attention_forward: below this many multiply-adds per call a thread team costs more than
// it saves (Note [No thread team for small or single-threaded loops]).
constexpr std::int64_t kParallelWork = 1 << 16;

// Tile edge for sequence length T: kTile, or T itself when shorter.
int tile_edge(int T) { return std::min(kTile, std::max(T, 1)); }

// One thread's share of the workspace: three [tile, tile] tiles (the forward pass uses one),
// two [tile] rows and one [T] row, padded to whole 64-byte lines so that threads never share one.
std::size_t per_thread_elements(int T) {
  const std::size_t tile = static_cast<std::size_t>(tile_edge(T));
  const std::size_t n = 3 * tile * tile + 2 * tile + static_cast<std::size_t>(T);
  return (n + 15) / 16 * 16;
}

void check_arguments(const char* fn, int B, int T, int C, int NH, float dropout_p) {
  if (!(dropout_p >= 0.0f && dropout_p < 1.0f)) {
    throw std::invalid_argument(std::string(fn) + ": dropout_p = " + std::to_string(dropout_p) +
                                "; expected a probability in [0, 1)");
  }
  if (NH <= 0 || C <= 0 || C % NH != 0) {
    throw std::invalid_argument(std::string(fn) + ": num_attention_heads = " + std::to_string(NH) +
                                " does not divide hidden_size = " + std::to_string(C));
  }
  if (B < 0 || T < 0) {
    throw std::invalid_argument(std::string(fn) + ": B = " + std::to_string(B) + ", T = " + std::to_string(T) +
                                "; expected sizes >= 0");
  }
}

// Note [Flash attention workspace alignment]
// Eigen's vectorized exp and sum over a map peel the leading elements up to the first aligned
// one and do those with scalar code, which rounds differently (std::exp against Eigen's
// polynomial; another summation order). The tiles' rounding would then depend on where the
// caller's workspace happens to lie and on which thread's share a head used: a recomputed
// forward pass (activation checkpointing) would not be bitwise equal to the first one. The
// workspace is therefore used from its first 64-byte boundary on (16 spare elements cover the
// shift), and every share is a whole number of 64-byte lines, so each tile row sits at the
// same offset from a boundary in every call, on every thread.
constexpr std::size_t kAlignBytes = 64;
constexpr std::size_t kSpareElements = 16;  // >= kAlignBytes / sizeof(Scalar) for float, double

template <class Scalar>
Scalar* align_workspace(Scalar* workspace) {
  const auto address = reinterpret_cast<std::uintptr_t>(workspace);
  const std::uintptr_t aligned = (address + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
  return workspace + (aligned - address) / sizeof(Scalar);
}

// The loop over (b, h) tasks, with each task's share of the workspace: the slot of the OpenMP
// thread running it (thread 0 when the loop runs inline).
template <class Scalar, class Body>
void for_each_head(int B, int T, int NH, int HS, Scalar* workspace, Body&& body) {
  const std::int64_t n = static_cast<std::int64_t>(B) * NH;
  const bool worth_it = n * T * T * HS >= kParallelWork;
  const bool team = detail::use_team(worth_it) && n > 1;
  const std::size_t share = per_thread_elements(T);
  workspace = align_workspace(workspace);
  SerialBlasScope serial_blas;  // Note [OpenBLAS inside OpenMP loops]
  detail::parallel_for(n, worth_it, [=](std::int64_t task) {
    const int slot = team ? omp_get_thread_num() : 0;
    body(static_cast<int>(task / NH), static_cast<int>(task % NH), workspace + slot * share);
  });
}

// One GEMM on tiles addressed in place (row-major, leading dimensions in elements):
// C = alpha * op(A) op(B) + beta * C. Runs on the calling thread inside the (b, h) loop.
template <class Scalar>
void tile_gemm(Scalar* c, const Scalar* a, const Scalar* b, int M, int N, int K, bool trans_a, bool trans_b, int lda,
               int ldb, int ldc, Scalar alpha, Scalar beta) {
  matmul_strided_batched(c, a, b, 1, M, N, K, trans_a, trans_b, 0, 0, 0, lda, ldb, ldc, alpha, beta);
}

template <class Scalar>
using Row = Eigen::Map<Eigen::Array<Scalar, Eigen::Dynamic, 1>>;

}  // namespace

std::size_t flash_attention_workspace_elements(int T, int C, int NH) {
  (void)C;
  (void)NH;
  if (T < 0) {
    throw std::invalid_argument("flash_attention_workspace_elements: T = " + std::to_string(T) + "; expected T >= 0");
  }
  return per_thread_elements(T) * static_cast<std::size_t>(num_threads()) + kSpareElements;
}

// Note [Online softmax with dropout]
// For query row i, over key tiles j: m = running max of the masked scores, l = running
// sum of exp(s - m), and out_i = running sum of exp(s - m) * z_ij * v_j with z the dropout
// factor (keep / (1 - p)). A new tile with max m' rescales l and out_i by exp(m - m')
// (Algorithm 1, lines 10-12). At the end out_i / l = sum_j softmax_ij z_ij v_j: dropout
// multiplies the normalised probabilities, as in attention_forward, because l sums the
// undropped terms. lse_i = m + log(l) lets the backward pass rebuild softmax_ij =
// exp(s_ij - lse_i) without the row statistics of every tile.
template <class Scalar>
void flash_attention_forward(Scalar* out, Scalar* lse, const Scalar* q, const Scalar* k, const Scalar* v,
                             const NoDeduce<Scalar>* key_mask, int B, int T, int C, int NH, float dropout_p,
                             const RngKey& key, std::uint64_t first_sample, Scalar* workspace, int first_head) {
  check_arguments("flash_attention_forward", B, T, C, NH, dropout_p);
  const int HS = C / NH;
  const Scalar scale = Scalar(1) / std::sqrt(Scalar(HS));
  const PhiloxStream stream(key);
  const bool drop = dropout_p > 0.0f;
  constexpr Scalar kNegInf = -std::numeric_limits<Scalar>::infinity();
  const int tile = tile_edge(T);
  for_each_head(B, T, NH, HS, workspace, [=](int b, int h, Scalar* ws) {
    const std::int64_t head = static_cast<std::int64_t>(b) * T * C + h * HS;
    const Scalar* mask = key_mask ? key_mask + static_cast<std::int64_t>(b) * T : nullptr;  // [T]
    Scalar* P = ws;                                                      // [tile, tile] scores, then exp(s - m)
    Scalar* m = ws + 3 * tile * tile;                                    // [tile] running max
    Scalar* l = m + tile;                                                // [tile] running sum
    Scalar* lse_bh = lse + (static_cast<std::int64_t>(b) * NH + h) * T;  // [T]
    for (int i0 = 0; i0 < T; i0 += tile) {
      const int rows = std::min(tile, T - i0);
      const Scalar* qi = q + head + static_cast<std::int64_t>(i0) * C;  // [rows, HS], stride C
      Scalar* oi = out + head + static_cast<std::int64_t>(i0) * C;      // [rows, HS], stride C
      for (int r = 0; r < rows; ++r) {
        m[r] = kNegInf;
        l[r] = 0;
        std::fill_n(oi + static_cast<std::int64_t>(r) * C, HS, Scalar(0));
      }
      for (int j0 = 0; j0 < T; j0 += tile) {
        const int cols = std::min(tile, T - j0);
        const Scalar* kj = k + head + static_cast<std::int64_t>(j0) * C;  // [cols, HS], stride C
        const Scalar* vj = v + head + static_cast<std::int64_t>(j0) * C;  // [cols, HS], stride C
        const Scalar* mj = mask ? mask + j0 : nullptr;                    // [cols]
        // P = Q_i K_j^T / sqrt(HS)   // [rows, cols]
        tile_gemm(P, qi, kj, rows, cols, HS, false, true, C, C, tile, scale, Scalar(0));
        for (int r = 0; r < rows; ++r) {
          Scalar* p = P + r * tile;  // [cols]
          if (mj) {
            for (int c = 0; c < cols; ++c) p[c] = mj[c] != Scalar(0) ? p[c] : kNegInf;
          }
          Scalar mx = m[r];
#pragma omp simd reduction(max : mx)
          for (int c = 0; c < cols; ++c) mx = p[c] > mx ? p[c] : mx;
          if (mx == kNegInf) {  // every key so far is padding: nothing to add
            std::fill_n(p, cols, Scalar(0));
            continue;
          }
          // exp through Eigen's vectorized exp, as masked_softmax_row; padding is zeroed
          // exactly afterwards because the SIMD exp clamps -inf to a tiny positive value.
          for (int c = 0; c < cols; ++c) p[c] -= mx;
          Row<Scalar> row(p, cols);
          row = row.exp();
          if (mj) {
            for (int c = 0; c < cols; ++c) p[c] = mj[c] != Scalar(0) ? p[c] : Scalar(0);
          }
          const Scalar alpha = std::exp(m[r] - mx);  // 0 for the first live tile (m = -inf)
          l[r] = alpha * l[r] + row.sum();
          if (alpha != Scalar(1)) {
            Scalar* o = oi + static_cast<std::int64_t>(r) * C;
            for (int e = 0; e < HS; ++e) o[e] *= alpha;
          }
          m[r] = mx;
          if (drop) {
            apply_dropout_mask(p, cols, dropout_p, stream, first_sample + b,
                               (static_cast<std::uint64_t>(first_head + h) * T + i0 + r) * T + j0);
          }
        }
        // O_i += P V_j   // [rows, HS]
        tile_gemm(oi, P, vj, rows, HS, cols, false, false, tile, C, C, Scalar(1), Scalar(1));
      }
      for (int r = 0; r < rows; ++r) {
        Scalar* o = oi + static_cast<std::int64_t>(r) * C;
        if (l[r] == Scalar(0)) {  // every key padding: zeros, like masked_softmax_row
          std::fill_n(o, HS, Scalar(0));
          lse_bh[i0 + r] = kNegInf;
          continue;
        }
        const Scalar inv = Scalar(1) / l[r];
        for (int e = 0; e < HS; ++e) o[e] *= inv;
        lse_bh[i0 + r] = m[r] + std::log(l[r]);
      }
    }
  });
}

// Note [Flash attention backward]
// With Z the dropout factors and P = softmax(S): out = (P o Z) V, so
//   dV = (P o Z)^T dO,   dP = (dO V^T) o Z,   dS = P o (dP - D),   D_i = sum_j dP_ij P_ij,
//   dQ = dS K / sqrt(HS),   dK = dS^T Q / sqrt(HS).
// D_i = sum_j (dO_i . v_j) Z_ij P_ij = dO_i . out_i (FlashAttention eq. 4 and its dropout
// variant), computed once per row from the outputs, so no tile needs a whole row of dP.
// With dropout, dS = (P o Z) o (dO V^T) - P o D reuses the dropped tile that dV needs: the
// Philox mask is drawn once per tile instead of twice (it was a fifth of the pass).
// Key tiles are the outer loop (FlashAttention-2, Algorithm 2): dK_j and dV_j accumulate
// straight into dk and dv, and dQ_i into dq; all three belong to this (b, h) task alone.
template <class Scalar>
void flash_attention_backward(Scalar* dq, Scalar* dk, Scalar* dv, const Scalar* dout, const Scalar* out,
                              const Scalar* lse, const Scalar* q, const Scalar* k, const Scalar* v,
                              const NoDeduce<Scalar>* key_mask, int B, int T, int C, int NH, float dropout_p,
                              const RngKey& key, std::uint64_t first_sample, Scalar* workspace, int first_head) {
  check_arguments("flash_attention_backward", B, T, C, NH, dropout_p);
  const int HS = C / NH;
  const Scalar scale = Scalar(1) / std::sqrt(Scalar(HS));
  const PhiloxStream stream(key);
  const bool drop = dropout_p > 0.0f;
  constexpr Scalar kNegInf = -std::numeric_limits<Scalar>::infinity();
  const int tile = tile_edge(T);
  for_each_head(B, T, NH, HS, workspace, [=](int b, int h, Scalar* ws) {
    const std::int64_t head = static_cast<std::int64_t>(b) * T * C + h * HS;
    const Scalar* mask = key_mask ? key_mask + static_cast<std::int64_t>(b) * T : nullptr;  // [T]
    const Scalar* lse_bh = lse + (static_cast<std::int64_t>(b) * NH + h) * T;               // [T]
    Scalar* P = ws;                               // [tile, tile] probabilities
    Scalar* PZ = ws + tile * tile;                // [tile, tile] dropped probabilities
    Scalar* dS = ws + 2 * tile * tile;            // [tile, tile] dO V^T, then dS
    Scalar* D = ws + 3 * tile * tile + 2 * tile;  // [T] D_i = dO_i . out_i
    for (int i = 0; i < T; ++i) {
      const Scalar* o = out + head + static_cast<std::int64_t>(i) * C;
      const Scalar* g = dout + head + static_cast<std::int64_t>(i) * C;
      Scalar d = 0;
      for (int e = 0; e < HS; ++e) d += g[e] * o[e];
      D[i] = d;
    }
    for (int j0 = 0; j0 < T; j0 += tile) {
      const int cols = std::min(tile, T - j0);
      const Scalar* kj = k + head + static_cast<std::int64_t>(j0) * C;  // [cols, HS], stride C
      const Scalar* vj = v + head + static_cast<std::int64_t>(j0) * C;  // [cols, HS], stride C
      Scalar* dkj = dk + head + static_cast<std::int64_t>(j0) * C;      // [cols, HS], stride C
      Scalar* dvj = dv + head + static_cast<std::int64_t>(j0) * C;      // [cols, HS], stride C
      const Scalar* mj = mask ? mask + j0 : nullptr;                    // [cols]
      for (int i0 = 0; i0 < T; i0 += tile) {
        const int rows = std::min(tile, T - i0);
        const Scalar* qi = q + head + static_cast<std::int64_t>(i0) * C;     // [rows, HS]
        const Scalar* gi = dout + head + static_cast<std::int64_t>(i0) * C;  // [rows, HS]
        Scalar* dqi = dq + head + static_cast<std::int64_t>(i0) * C;         // [rows, HS]
        // P = exp(Q_i K_j^T / sqrt(HS) - lse_i), padding and all-padding rows 0   // [rows, cols]
        tile_gemm(P, qi, kj, rows, cols, HS, false, true, C, C, tile, scale, Scalar(0));
        for (int r = 0; r < rows; ++r) {
          Scalar* p = P + r * tile;
          const Scalar row_lse = lse_bh[i0 + r];
          if (row_lse == kNegInf) {
            std::fill_n(p, cols, Scalar(0));
            continue;
          }
          for (int c = 0; c < cols; ++c) p[c] -= row_lse;
          Row<Scalar> row(p, cols);
          row = row.exp();
          if (mj) {
            for (int c = 0; c < cols; ++c) p[c] = mj[c] != Scalar(0) ? p[c] : Scalar(0);
          }
        }
        // dV_j += (P o Z)^T dO_i   // [cols, HS]
        const Scalar* dropped = P;
        if (drop) {
          for (int r = 0; r < rows; ++r) {
            std::memcpy(PZ + r * tile, P + r * tile, sizeof(Scalar) * cols);
            apply_dropout_mask(PZ + r * tile, cols, dropout_p, stream, first_sample + b,
                               (static_cast<std::uint64_t>(first_head + h) * T + i0 + r) * T + j0);
          }
          dropped = PZ;
        }
        tile_gemm(dvj, dropped, gi, cols, HS, rows, true, false, tile, C, C, Scalar(1), Scalar(1));
        // dS = (P o Z) o (dO_i V_j^T) - P o D_i   // [rows, cols]
        tile_gemm(dS, gi, vj, rows, cols, HS, false, true, C, C, tile, Scalar(1), Scalar(0));
        for (int r = 0; r < rows; ++r) {
          Scalar* d = dS + r * tile;
          const Scalar* p = P + r * tile;
          const Scalar* pz = dropped + r * tile;
          const Scalar Di = D[i0 + r];
#pragma omp simd
          for (int c = 0; c < cols; ++c) d[c] = pz[c] * d[c] - p[c] * Di;
        }
        // dQ_i += dS K_j / sqrt(HS); dK_j += dS^T Q_i / sqrt(HS)
        tile_gemm(dqi, dS, kj, rows, HS, cols, false, false, tile, C, C, scale, Scalar(1));
        tile_gemm(dkj, dS, qi, cols, HS, rows, true, false, tile, C, C, scale, Scalar(1));
      }
    }
  });
}

#define MEMTRAIN_INSTANTIATE(S)                                                                                       \
  template void flash_attention_forward<S>(S*, S*, const S*, const S*, const S*, const S*, int, int, int, int, float, \
                                           const RngKey&, std::uint64_t, S*, int);                                    \
  template void flash_attention_backward<S>(S*, S*, S*, const S*, const S*, const S*, const S*, const S*, const S*,   \
                                            const S*, int, int, int, int, float, const RngKey&, std::uint64_t, S*,    \
                                            int);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(double)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels
