#pragma once
// GEMM through Eigen with OpenBLAS as its BLAS backend (EIGEN_USE_BLAS => sgemm).
namespace memtrain::kernels {

// C = alpha * op(A) * op(B) + beta * C, all row-major.
// op(A) [M, K] (A is [M, K], or [K, M] when trans_a); op(B) [K, N] (B is [K, N], or [N, K] when
// trans_b); C [M, N]. Never allocates (beyond what the BLAS library does internally).
void matmul(float* C, const float* A, const float* B, int M, int N, int K, bool trans_a,
            bool trans_b, float alpha = 1.0f, float beta = 0.0f);

// `batch` independent matmuls; matrix i of X starts at X + i * stride_X (elements).
// Leading dimensions lda/ldb/ldc (elements between rows) let callers address one head inside
// an interleaved [B, T, C] tensor without copying.
void matmul_strided_batched(float* C, const float* A, const float* B, int batch, int M, int N,
                            int K, bool trans_a, bool trans_b, long stride_a, long stride_b,
                            long stride_c, int lda, int ldb, int ldc, float alpha = 1.0f,
                            float beta = 0.0f);

}  // namespace memtrain::kernels
