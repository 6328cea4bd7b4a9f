#include "kernels/cpu/matmul.hpp"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/parallel.hpp"

namespace memtrain::kernels {
namespace {

template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ConstMap = Eigen::Map<const RowMajor<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using MutMap = Eigen::Map<RowMajor<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

// One GEMM on strided row-major views. Eigen hands `c += alpha * op(a) * op(b)` to
// sgemm/dgemm with the strides and transposes folded in: no copies.
template <class T>
void gemm(T* C, const T* A, const T* B, int M, int N, int K, bool trans_a, bool trans_b, int lda, int ldb, int ldc,
          T alpha, T beta) {
  MutMap<T> c(C, M, N, Eigen::OuterStride<>(ldc));
  if (beta == T(0)) {
    c.setZero();
  } else if (beta != T(1)) {
    c *= beta;
  }
  if (K == 0 || alpha == T(0)) return;
  const ConstMap<T> a(A, trans_a ? K : M, trans_a ? M : K, Eigen::OuterStride<>(lda));
  const ConstMap<T> b(B, trans_b ? N : K, trans_b ? K : N, Eigen::OuterStride<>(ldb));
  if (!trans_a && !trans_b) {
    c.noalias() += alpha * a * b;
  } else if (!trans_a && trans_b) {
    c.noalias() += alpha * a * b.transpose();
  } else if (trans_a && !trans_b) {
    c.noalias() += alpha * a.transpose() * b;
  } else {
    c.noalias() += alpha * a.transpose() * b.transpose();
  }
}

}  // namespace

// Note [One thread pool: GEMMs split over OpenMP]
// The kernels alternate GEMMs with elementwise OpenMP loops. Letting OpenBLAS thread its own
// GEMMs means two thread pools on the same cores: libgomp's workers busy-wait (GOMP_SPINCOUNT,
// milliseconds) after each loop while OpenBLAS's pthread workers need those cores for the next
// GEMM, and OpenBLAS's workers spin after it in turn. A large GEMM is therefore split into
// num_threads() slabs of C (along M, or along N when that is larger), each a single-threaded
// sgemm on an OpenMP thread: one pool, no cross-pool spinning, and the split has the same
// per-thread work as OpenBLAS's own M/N partition (each slab repacks its share of the other
// operand: O(K (M + N)) against O(M N K) multiply-adds).
constexpr double kSplitWork = 1 << 21;  // multiply-adds below which one thread does it all

template <class T>
void matmul(T* C, const T* A, const T* B, int M, int N, int K, bool trans_a, bool trans_b, NoDeduce<T> alpha,
            NoDeduce<T> beta) {
  if (M == 0 || N == 0) return;
  const int lda = trans_a ? M : K, ldb = trans_b ? K : N;
  const int threads = num_threads();
  if (omp_in_parallel()) {  // the caller's loop already runs OpenBLAS single-threaded
    gemm(C, A, B, M, N, K, trans_a, trans_b, lda, ldb, N, alpha, beta);
    return;
  }
  // OpenBLAS would thread a mid-size GEMM itself (above about 2.6e5 multiply-adds): keep even
  // the unsplit ones on this thread, so that OpenBLAS's pool never competes with OpenMP's.
  SerialBlasScope serial_blas;
  if (threads <= 1 || static_cast<double>(M) * N * K < kSplitWork) {
    gemm(C, A, B, M, N, K, trans_a, trans_b, lda, ldb, N, alpha, beta);
    return;
  }
  constexpr int kAlign = 16;  // slab edges on whole SIMD registers / cache lines
  const bool split_m = M >= N;
  const int extent = split_m ? M : N;
  int slab = ((extent + threads - 1) / threads + kAlign - 1) / kAlign * kAlign;
  // Note [Skinny GEMMs in column blocks]
  // A GEMM of few rows and many columns (the MLM decoder: [masked ~150, 768] x [768, 30522])
  // streams its whole B operand through one packing pass per slab while reusing each packed
  // panel only M times. In blocks of at most kSkinnyBlock columns, several per thread, each
  // block's B panel is packed and consumed while it is in cache: 19.1 -> 17.3 ms for the
  // decoder's forward product on 2 threads (SkylakeX kernels; 1024 and 512 columns alike). Each
  // element is still one dot product over K (OpenBLAS may pick another kernel for a block's
  // shape than for the whole product, so equal to within rounding).
  constexpr int kSkinnyRows = 256, kSkinnyBlock = 512;
  if (!split_m && M < kSkinnyRows) slab = std::min(slab, kSkinnyBlock);
  const int slabs = (extent + slab - 1) / slab;
  detail::parallel_for(slabs, true, [=](std::int64_t s) {
    const int lo = s * slab, len = std::min(extent, lo + slab) - lo;
    if (split_m) {
      // rows lo.. of C and of op(A): A advances by rows (or by columns when transposed)
      const T* a = trans_a ? A + lo : A + static_cast<std::int64_t>(lo) * lda;
      gemm(C + static_cast<std::int64_t>(lo) * N, a, B, len, N, K, trans_a, trans_b, lda, ldb, N, alpha, beta);
    } else {
      // columns lo.. of C and of op(B)
      const T* b = trans_b ? B + static_cast<std::int64_t>(lo) * ldb : B + lo;
      gemm(C + lo, A, b, M, len, K, trans_a, trans_b, lda, ldb, N, alpha, beta);
    }
  });
}

template <class T>
void matmul_strided_batched(T* C, const T* A, const T* B, int batch, int M, int N, int K, bool trans_a, bool trans_b,
                            long stride_a, long stride_b, long stride_c, int lda, int ldb, int ldc, NoDeduce<T> alpha,
                            NoDeduce<T> beta) {
  if (batch <= 0 || M == 0 || N == 0) return;
  if (omp_in_parallel()) {  // e.g. one head inside attention's (b, h) loop: stay on this thread
    for (int i = 0; i < batch; ++i) {
      gemm(C + i * stride_c, A + i * stride_a, B + i * stride_b, M, N, K, trans_a, trans_b, lda, ldb, ldc, alpha, beta);
    }
    return;
  }
  SerialBlasScope serial_blas;  // Note [OpenBLAS inside OpenMP loops]
  // Tiny batches are not worth waking a thread team for.
  const bool parallel = batch > 1 && static_cast<double>(batch) * M * N * K >= 65536.0;
  detail::parallel_for(batch, parallel, [=](std::int64_t i) {
    gemm(C + i * stride_c, A + i * stride_a, B + i * stride_b, M, N, K, trans_a, trans_b, lda, ldb, ldc, alpha, beta);
  });
}

#define MEMTRAIN_INSTANTIATE(T)                                                                                     \
  template void matmul<T>(T*, const T*, const T*, int, int, int, bool, bool, T, T);                                 \
  template void matmul_strided_batched<T>(T*, const T*, const T*, int, int, int, int, bool, bool, long, long, long, \
                                          int, int, int, T, T);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(double)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels
