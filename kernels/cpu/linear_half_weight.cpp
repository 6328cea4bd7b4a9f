#include "kernels/cpu/linear_half_weight.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/column_sum.hpp"
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
// kMaxRows weight rows into its own scratch (1.5 MB at C = 768, so they stay in L2) and runs the
// sgemm of that block of output columns at once; the weight gradient of a block is computed into
// scratch and rounded while it is still in cache. The whole weight is never held in fp32. The
// dot products are linear.hpp's: the forward output and the weight gradient get the same fp32
// sums (a block of columns changes no element's reduction), and the input gradient sums the same
// products over OC a block at a time. The output's and the weight gradient's blocks depend on OC
// alone (so do those results, not on the thread count); there are a multiple of 4 of them (the decoder's 30,522 rows in 60 blocks of
// 512, BERT-Base's 768 in 4 of 192), so 1, 2 or 4 threads get equal shares.

namespace {

constexpr int kMaxRows = 512;  // weight rows per block: at most kMaxRows x C floats of scratch
constexpr int kAlign = 16;     // block edges on whole cache lines of the fp32 output

struct Blocks {
  int rows = 0;   // rows per block (the last may be shorter)
  int count = 0;  // number of blocks
};

// OC rows in blocks of at most kMaxRows, a multiple of 4 of them where the rows allow.
Blocks blocks_of(int OC) {
  const int wanted = (OC + 4 * kMaxRows - 1) / (4 * kMaxRows) * 4;
  int rows = (OC + wanted - 1) / wanted;
  rows = std::min(kMaxRows, (rows + kAlign - 1) / kAlign * kAlign);
  return {rows, (OC + rows - 1) / rows};
}

// Rows [r0, r0 + rows) of the [OC, C] 16-bit matrix w into dst [rows, C], a row at a time (a
// row is below half_convert's threshold for a thread team, so this stays on the calling thread).
void rows_to_float(float* dst, const std::uint16_t* w, int r0, int rows, int C, HalfFormat format) {
  for (int r = 0; r < rows; ++r) {
    convert_half_to_float(dst + static_cast<std::int64_t>(r) * C, w + static_cast<std::int64_t>(r0 + r) * C, C, format);
  }
}

void rows_to_half(std::uint16_t* w, const float* src, int r0, int rows, int C, HalfFormat format) {
  for (int r = 0; r < rows; ++r) {
    convert_float_to_half(w + static_cast<std::int64_t>(r0 + r) * C, src + static_cast<std::int64_t>(r) * C, C, format);
  }
}

// This thread's scratch: kMaxRows x C floats each.
float* thread_scratch(float* scratch, int C) {
  return scratch + static_cast<std::int64_t>(omp_get_thread_num()) * kMaxRows * C;
}

}  // namespace

std::size_t linear_half_weight_scratch_elements(int C) {
  return static_cast<std::size_t>(num_threads()) * kMaxRows * static_cast<std::size_t>(std::max(C, 0));
}

void linear_forward_half_weight(float* out, const float* inp, const std::uint16_t* weight, const float* bias,
                                int N, int C, int OC, HalfFormat format, float* scratch) {
  if (N <= 0 || OC <= 0) return;
  const int threads = num_threads();
  const Blocks b = blocks_of(OC);
  SerialBlasScope serial_blas;  // Note [OpenBLAS inside OpenMP loops]
  detail::parallel_for(b.count, threads > 1 && b.count > 1, [=](std::int64_t i) {
    const int r0 = static_cast<int>(i) * b.rows, rows = std::min(OC - r0, b.rows);
    float* w = thread_scratch(scratch, C);  // [rows, C]
    rows_to_float(w, weight, r0, rows, C, format);
    float beta = 0.0f;
    if (bias != nullptr) {
      for (int n = 0; n < N; ++n) std::copy(bias + r0, bias + r0 + rows, out + static_cast<std::int64_t>(n) * OC + r0);
      beta = 1.0f;
    }
    // out[:, r0:r0+rows] [N, rows] = inp [N, C] w [rows, C]^T
    matmul_strided_batched(out + r0, inp, w, 1, N, rows, C, false, true, 0, 0, 0, C, C, OC, 1.0f, beta);
  });
}

void linear_backward_half_weight(float* dinp, std::uint16_t* dweight, bool dweight_accumulate, float* dbias,
                                 const float* dout, const float* inp, const std::uint16_t* weight, int N, int C,
                                 int OC, HalfFormat format, float* scratch) {
  if (N <= 0 || OC <= 0) return;
  const int threads = num_threads();
  const Blocks b = blocks_of(OC);
  SerialBlasScope serial_blas;  // Note [OpenBLAS inside OpenMP loops]
  if (dweight != nullptr) {
    detail::parallel_for(b.count, threads > 1 && b.count > 1, [=](std::int64_t i) {
      const int r0 = static_cast<int>(i) * b.rows, rows = std::min(OC - r0, b.rows);
      float* g = thread_scratch(scratch, C);  // [rows, C]
      if (dweight_accumulate) rows_to_float(g, dweight, r0, rows, C, format);
      // g [rows, C] (+)= dout[:, r0:r0+rows]^T [rows, N] inp [N, C]
      matmul_strided_batched(g, dout + r0, inp, 1, rows, C, N, true, false, 0, 0, 0, OC, C, C, 1.0f,
                             dweight_accumulate ? 1.0f : 0.0f);
      rows_to_half(dweight, g, r0, rows, C, format);
    });
  }
  if (dinp != nullptr) {
    // Each thread owns a slab of dinp's columns and walks the weight a block of rows at a time,
    // converting only its columns of the block (no thread converts what another does); each
    // block's products are added into the slab. A block here has as many rows as the scratch
    // holds at the slab's width, so that a wide slab (dinp [1024, 3072] under a [768, 3072]
    // weight) is written once, not once per forward block; this makes the order of dinp's
    // sums, like parallel_sums', depend on the thread count.
    const int slab = (std::max(1, (C + threads - 1) / threads) + kAlign - 1) / kAlign * kAlign;
    const int slabs = (C + slab - 1) / slab;
    const int dinp_rows = std::max(1, static_cast<int>(static_cast<std::int64_t>(kMaxRows) * C / std::min(C, slab)));
    detail::parallel_for(slabs, threads > 1 && slabs > 1, [=](std::int64_t s) {
      const int c0 = static_cast<int>(s) * slab, cols = std::min(C - c0, slab);
      float* w = thread_scratch(scratch, C);  // [rows, cols]
      for (int r0 = 0; r0 < OC; r0 += dinp_rows) {
        const int rows = std::min(OC - r0, dinp_rows);
        for (int r = 0; r < rows; ++r) {
          convert_half_to_float(w + static_cast<std::int64_t>(r) * cols,
                                weight + static_cast<std::int64_t>(r0 + r) * C + c0, cols, format);
        }
        // dinp[:, c0:c0+cols] [N, cols] += dout[:, r0:r0+rows] [N, rows] w [rows, cols]
        matmul_strided_batched(dinp + c0, dout + r0, w, 1, N, cols, rows, false, false, 0, 0, 0, OC, cols, C, 1.0f,
                               1.0f);
      }
    });
  }
  if (dbias != nullptr) detail::add_column_sums(dbias, dout, N, OC);
}

}  // namespace memtrain::kernels
