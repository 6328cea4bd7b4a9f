#pragma once
// GEMM through Eigen maps with OpenBLAS as Eigen's BLAS backend (EIGEN_USE_BLAS => sgemm/dgemm).
// Templates over the scalar type: see Note [Kernels are templates over the scalar type].
#include "kernels/cpu/scalar.hpp"

namespace memtrain::kernels {

// C = alpha * op(A) * op(B) + beta * C, all row-major.
// op(A) [M, K] (A is [M, K], or [K, M] when trans_a); op(B) [K, N] (B is [K, N], or [N, K] when
// trans_b); C [M, N]. With beta == 0, C is not read (it may hold garbage or NaN).
// OpenBLAS runs single-threaded; a GEMM of 2^21 multiply-adds or more is split into
// num_threads() slabs on OpenMP threads (Note [One thread pool: GEMMs split over OpenMP]).
// Never allocates (beyond what the BLAS library does internally).
template <class T>
void matmul(T* C, const T* A, const T* B, int M, int N, int K, bool trans_a, bool trans_b, NoDeduce<T> alpha = T(1),
            NoDeduce<T> beta = T(0));

// `batch` independent matmuls; matrix i of X starts at X + i * stride_X (elements).
// Leading dimensions lda/ldb/ldc (elements between rows of the stored, untransposed matrix)
// let callers address one head inside an interleaved [B, T, C] tensor without copying.
// The matmuls run in parallel on num_threads() OpenMP threads, each GEMM single-threaded
// (Note [OpenBLAS inside OpenMP loops]). May be called from inside an OpenMP loop (then it
// runs on the calling thread).
template <class T>
void matmul_strided_batched(T* C, const T* A, const T* B, int batch, int M, int N, int K, bool trans_a, bool trans_b,
                            long stride_a, long stride_b, long stride_c, int lda, int ldb, int ldc,
                            NoDeduce<T> alpha = T(1), NoDeduce<T> beta = T(0));

}  // namespace memtrain::kernels
