#include "kernels/cpu/linear_half_weight.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/column_sum.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/cpu/threads.hpp"

namespace memtrain::kernels {

// Note [16-bit weights a block at a time]
// With 16-bit weights and no 16-bit dot products, a linear layer needs its weight in fp32 for
// the sgemm. Converting the whole weight into a float view first writes 4 bytes an element to
// memory and has the sgemm read them back: for BERT's tied decoder (30,522 x 768) that was a
// 94 MB round trip in forward, and as much again rounding the weight gradient from a zeroed
// float view in backward, about 7 ms of a 320 ms fp16 step (issue 15). Here each thread converts
// a block of weight rows (at most 512, and at most kBlockFloats floats: 3 MB, so that it stays
// in L2 or L3) into its own scratch and runs the sgemm of that block of output columns at once; the
// weight gradient of a block is computed into scratch and rounded while it is still in cache.
// The whole weight is never held in fp32. Each output and weight-gradient element is the same
// kind of fp32 dot product linear.hpp computes (over C, and over N); the input gradient sums
// its products over OC a block of weight rows at a time. OpenBLAS picks its kernels by shape,
// so none of these is promised bitwise equal to linear.hpp's, only equal to within rounding
// (tests/kernels/linear_half_weight_test.cpp). The blocks are a multiple of the thread count
// (the decoder's 30,522 rows in 60 blocks of 512 on 2 threads), so results may differ in their
// last bits between thread counts, as parallel_sums' do.
//
// Note [Small 16-bit weights convert whole]
// Blocks of weight rows give the sgemm another shape than linear.hpp's: a thread multiplies all
// N rows by its block of output columns, where matmul splits the N rows over the threads. For
// the layer weights of BERT-Base (768 x 768 and 768 x 3072) that cost 5-12% per product against
// the fp32 linear on the same operands (benchmarks/bench_half_weight_linear.cpp), 17 ms of a
// 440 ms fp16 bench-bert step, while converting such a weight whole takes 0.05-0.3 ms. So a
// weight of at most kWholeFloats elements (16 MB as floats, which a shared L3 can hold) is converted
// whole into the scratch and multiplied by linear.hpp's kernels, bitwise what linear.hpp gives
// on the converted weight; its gradient is computed into the same scratch after the input
// gradient is done with the weight, and rounded whole. Only the decoder's 23 M elements
// go a block at a time.

namespace {

constexpr int kAlign = 16;             // block edges on whole cache lines of the fp32 output
constexpr int kMaxRows = 512;          // weight rows per block at most
constexpr int kBlockFloats = 3 << 18;  // a block's floats at most (3 MB), unless 16 rows exceed it
constexpr int kDinpRows = 1024;        // weight rows per input-gradient step at most
constexpr std::int64_t kWholeFloats = std::int64_t{1} << 22;  // Note [Small 16-bit weights convert whole]

bool converts_whole(int OC, int C) { return std::int64_t{OC} * C <= kWholeFloats; }

// How a [OC, C] weight is cut, for `threads` threads.
struct Plan {
  int rows = 0;                 // weight rows per block (the last may be shorter)
  int count = 0;                // blocks
  int slab = 0;                 // input-gradient columns per thread (the last may be narrower)
  int dinp_rows = 0;            // weight rows per input-gradient step
  std::int64_t per_thread = 0;  // scratch floats per thread
};

Plan plan_of(int OC, int C, int threads) {
  Plan p;
  const int rows_max = std::max(kAlign, std::min(kMaxRows, kBlockFloats / std::max(C, 1)) / kAlign * kAlign);
  p.count = (OC + rows_max - 1) / rows_max;
  p.count = (p.count + threads - 1) / threads * threads;
  p.rows = std::min(rows_max, ((OC + p.count - 1) / p.count + kAlign - 1) / kAlign * kAlign);
  p.count = (OC + p.rows - 1) / p.rows;
  p.slab = (std::max(1, (C + threads - 1) / threads) + kAlign - 1) / kAlign * kAlign;
  p.dinp_rows = std::min(OC, kDinpRows);
  p.per_thread = std::max(std::int64_t{p.rows} * C, std::int64_t{p.dinp_rows} * std::min(C, p.slab));
  return p;
}

// Columns [c0, c0 + cols) of rows [r0, r0 + rows) of the 16-bit matrix w (C columns) into dst
// [rows, cols], a row at a time (a row is below half_convert's threshold for a thread team, so
// this stays on the calling thread).
void rows_to_float(float* dst, const std::uint16_t* w, int r0, int rows, int C, int c0, int cols, HalfFormat format) {
  for (int r = 0; r < rows; ++r) {
    convert_half_to_float(dst + static_cast<std::int64_t>(r) * cols, w + static_cast<std::int64_t>(r0 + r) * C + c0,
                          cols, format);
  }
}

void rows_to_half(std::uint16_t* w, const float* src, int r0, int rows, int C, HalfFormat format) {
  for (int r = 0; r < rows; ++r) {
    convert_float_to_half(w + static_cast<std::int64_t>(r0 + r) * C, src + static_cast<std::int64_t>(r) * C, C, format);
  }
}

// This thread's part of the scratch.
float* thread_scratch(float* scratch, const Plan& p) { return scratch + omp_get_thread_num() * p.per_thread; }

}  // namespace

std::size_t linear_half_weight_scratch_elements(int OC, int C) {
  if (OC <= 0 || C <= 0) return 0;
  if (converts_whole(OC, C)) return static_cast<std::size_t>(OC) * static_cast<std::size_t>(C);
  const int threads = num_threads();
  return static_cast<std::size_t>(threads) * static_cast<std::size_t>(plan_of(OC, C, threads).per_thread);
}

void linear_forward_half_weight(float* out, const float* inp, const std::uint16_t* weight, const float* bias, int N,
                                int C, int OC, HalfFormat format, float* scratch) {
  if (N <= 0 || OC <= 0) return;
  if (C <= 0) {  // empty products: out = bias
    for (int n = 0; n < N; ++n) {
      float* row = out + static_cast<std::int64_t>(n) * OC;
      for (int o = 0; o < OC; ++o) row[o] = bias != nullptr ? bias[o] : 0.0f;
    }
    return;
  }
  if (converts_whole(OC, C)) {
    convert_half_to_float(scratch, weight, std::int64_t{OC} * C, format);  // [OC, C]
    linear_forward<float>(out, inp, scratch, bias, N, C, OC);
    return;
  }
  const int threads = num_threads();
  const Plan p = plan_of(OC, C, threads);
  SerialBlasScope serial_blas;  // Note [OpenBLAS inside OpenMP loops]
  detail::parallel_for(p.count, threads > 1 && p.count > 1, [=](std::int64_t i) {
    const int r0 = static_cast<int>(i) * p.rows, rows = std::min(OC - r0, p.rows);
    float* w = thread_scratch(scratch, p);  // [rows, C]
    rows_to_float(w, weight, r0, rows, C, 0, C, format);
    float beta = 0.0f;
    if (bias != nullptr) {
      for (int n = 0; n < N; ++n) std::copy(bias + r0, bias + r0 + rows, out + static_cast<std::int64_t>(n) * OC + r0);
      beta = 1.0f;
    }
    // out[:, r0:r0+rows] [N, rows] = inp [N, C] w [rows, C]^T
    matmul_strided_batched(out + r0, inp, w, 1, N, rows, C, false, true, 0, 0, 0, C, C, OC, 1.0f, beta);
  });
}

namespace {

// dinp += dout weight and dweight (+)= dout^T inp (either null to skip) through the weight
// converted whole (Note [Small 16-bit weights convert whole]).
void backward_products_whole(float* dinp, std::uint16_t* dweight, bool dweight_accumulate, const float* dout,
                             const float* inp, const std::uint16_t* weight, int N, int C, int OC, HalfFormat format,
                             float* scratch) {
  const std::int64_t n = std::int64_t{OC} * C;
  if (dinp != nullptr) {
    convert_half_to_float(scratch, weight, n, format);  // [OC, C]
    linear_backward<float>(dinp, nullptr, nullptr, dout, inp, scratch, N, C, OC);
  }
  if (dweight != nullptr) {
    // The weight is done with: the same scratch holds the gradient [OC, C].
    if (dweight_accumulate) convert_half_to_float(scratch, dweight, n, format);
    matmul(scratch, dout, inp, OC, C, N, /*trans_a=*/true, /*trans_b=*/false, 1.0f,
           dweight_accumulate ? 1.0f : 0.0f);  // [OC, N] x [N, C]
    convert_float_to_half(dweight, scratch, n, format);
  }
}

// The same products a block of weight rows at a time (Note [16-bit weights a block at a time]).
void backward_products_in_blocks(float* dinp, std::uint16_t* dweight, bool dweight_accumulate, const float* dout,
                                 const float* inp, const std::uint16_t* weight, int N, int C, int OC, HalfFormat format,
                                 float* scratch) {
  const int threads = num_threads();
  const Plan p = plan_of(OC, C, threads);
  SerialBlasScope serial_blas;  // Note [OpenBLAS inside OpenMP loops]
  if (dweight != nullptr) {
    detail::parallel_for(p.count, threads > 1 && p.count > 1, [=](std::int64_t i) {
      const int r0 = static_cast<int>(i) * p.rows, rows = std::min(OC - r0, p.rows);
      float* g = thread_scratch(scratch, p);  // [rows, C]
      if (dweight_accumulate) rows_to_float(g, dweight, r0, rows, C, 0, C, format);
      // g [rows, C] (+)= dout[:, r0:r0+rows]^T [rows, N] inp [N, C]
      matmul_strided_batched(g, dout + r0, inp, 1, rows, C, N, true, false, 0, 0, 0, OC, C, C, 1.0f,
                             dweight_accumulate ? 1.0f : 0.0f);
      rows_to_half(dweight, g, r0, rows, C, format);
    });
  }
  if (dinp != nullptr) {
    // Each thread owns a slab of dinp's columns and walks the weight kDinpRows rows at a time,
    // converting only its columns of them (no thread converts what another does); each step's
    // products are added into the slab, so a wide slab (dinp [1024, 3072] under a [768, 3072]
    // weight) is written once per kDinpRows weight rows, not once per forward block.
    const int slabs = (C + p.slab - 1) / p.slab;
    const int slab = p.slab, dinp_rows = p.dinp_rows;
    detail::parallel_for(slabs, threads > 1 && slabs > 1, [=](std::int64_t s) {
      const int c0 = static_cast<int>(s) * slab, cols = std::min(C - c0, slab);
      float* w = thread_scratch(scratch, p);  // [rows, cols]
      for (int r0 = 0; r0 < OC; r0 += dinp_rows) {
        const int rows = std::min(OC - r0, dinp_rows);
        rows_to_float(w, weight, r0, rows, C, c0, cols, format);
        // dinp[:, c0:c0+cols] [N, cols] += dout[:, r0:r0+rows] [N, rows] w [rows, cols]
        matmul_strided_batched(dinp + c0, dout + r0, w, 1, N, cols, rows, false, false, 0, 0, 0, OC, cols, C, 1.0f,
                               1.0f);
      }
    });
  }
}

}  // namespace

void linear_backward_half_weight(float* dinp, std::uint16_t* dweight, bool dweight_accumulate, float* dbias,
                                 const float* dout, const float* inp, const std::uint16_t* weight, int N, int C, int OC,
                                 HalfFormat format, float* scratch) {
  if (N > 0 && OC > 0 && C > 0) {  // else no products (a weight gradient of C = 0 columns has no elements)
    const auto products = converts_whole(OC, C) ? backward_products_whole : backward_products_in_blocks;
    products(dinp, dweight, dweight_accumulate, dout, inp, weight, N, C, OC, format, scratch);
  }
  if (dbias != nullptr && N > 0 && OC > 0) detail::add_column_sums(dbias, dout, N, OC);
}

}  // namespace memtrain::kernels
