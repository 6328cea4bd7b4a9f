#include "kernels/cpu/matmul.hpp"

#include <Eigen/Core>

#include "kernels/cpu/threads.hpp"

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
void gemm(T* C, const T* A, const T* B, int M, int N, int K, bool trans_a, bool trans_b, int lda,
          int ldb, int ldc, T alpha, T beta) {
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

template <class T>
void matmul(T* C, const T* A, const T* B, int M, int N, int K, bool trans_a, bool trans_b,
            NoDeduce<T> alpha, NoDeduce<T> beta) {
  if (M == 0 || N == 0) return;
  gemm(C, A, B, M, N, K, trans_a, trans_b, trans_a ? M : K, trans_b ? K : N, N, alpha, beta);
}

template <class T>
void matmul_strided_batched(T* C, const T* A, const T* B, int batch, int M, int N, int K,
                            bool trans_a, bool trans_b, long stride_a, long stride_b, long stride_c,
                            int lda, int ldb, int ldc, NoDeduce<T> alpha, NoDeduce<T> beta) {
  if (batch <= 0 || M == 0 || N == 0) return;
  if (batch == 1) {
    gemm(C, A, B, M, N, K, trans_a, trans_b, lda, ldb, ldc, alpha, beta);
    return;
  }
  // Tiny batches are not worth waking a thread team for.
  const bool parallel = static_cast<double>(batch) * M * N * K >= 65536.0;
  SerialBlasScope serial_blas;  // Note [OpenBLAS inside OpenMP loops]
#pragma omp parallel for schedule(static) num_threads(num_threads()) if (parallel)
  for (int i = 0; i < batch; ++i) {
    gemm(C + i * stride_c, A + i * stride_a, B + i * stride_b, M, N, K, trans_a, trans_b, lda, ldb,
         ldc, alpha, beta);
  }
}

#define MEMTRAIN_INSTANTIATE(T)                                                                   \
  template void matmul<T>(T*, const T*, const T*, int, int, int, bool, bool, T, T);               \
  template void matmul_strided_batched<T>(T*, const T*, const T*, int, int, int, int, bool, bool, \
                                          long, long, long, int, int, int, T, T);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(double)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels
