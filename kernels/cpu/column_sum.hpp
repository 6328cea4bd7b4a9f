#pragma once
// Column reductions of a row-major [N, C] matrix without a scratch buffer.
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/parallel.hpp"

namespace memtrain::kernels::detail {

// Note [Column-block parallel reductions]
// Bias gradients are sums over rows (LayerNorm's are summed in its row pass instead: Note
// [LayerNorm's parameter sums in the row pass]). Splitting rows across threads
// would need per-thread partial sums (a workspace, and kernels never allocate); splitting
// columns into blocks gives each thread a disjoint slice of the result and keeps the inner
// loop contiguous and vectorizable. Blocks are multiples of 64 elements (whole cache lines),
// and the summation order per column does not depend on the thread count.
//
// Calls body(c0, c1) for column blocks [c0, c1) covering [0, C) of an [N, C] matrix, in
// parallel unless the matrix is too small to be worth waking a thread team for.
template <class Body>
void for_column_blocks(int N, int C, Body&& body) {
  constexpr int kAlign = 64;
  const int threads = std::max(1, num_threads());
  int block = (C + threads - 1) / threads;
  block = std::max(kAlign, (block + kAlign - 1) / kAlign * kAlign);
  const int num_blocks = (C + block - 1) / block;
  const bool parallel = num_blocks > 1 && static_cast<std::int64_t>(N) * C >= 32768;
  parallel_for(num_blocks, parallel, [&](std::int64_t i) {
    const int blk = static_cast<int>(i);
    body(blk * block, std::min(C, (blk + 1) * block));
  });
}

// acc[c] += sum_n x[n, c], x [N, C] row-major, acc [C].
template <class T>
void add_column_sums(T* acc, const T* x, int N, int C) {
  for_column_blocks(N, C, [=](int c0, int c1) {
    for (int n = 0; n < N; ++n) {
      const T* row = x + static_cast<std::int64_t>(n) * C;
#pragma omp simd
      for (int c = c0; c < c1; ++c) acc[c] += row[c];
    }
  });
}

}  // namespace memtrain::kernels::detail
