#include "kernels/cuda/matmul.hpp"

#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/cuda/cublaslt_api.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "memory/cuda_error.hpp"

namespace memtrain::kernels::gpu {
namespace {

template <class T>
constexpr cudaDataType_t data_type();
template <>
constexpr cudaDataType_t data_type<float>() {
  return CUDA_R_32F;
}
template <>
constexpr cudaDataType_t data_type<__nv_bfloat16>() {
  return CUDA_R_16BF;
}
template <>
constexpr cudaDataType_t data_type<__half>() {
  return CUDA_R_16F;
}

// Largest power of two (up to 256) dividing the address: what the heuristic may assume.
std::uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

// RAII for the descriptors of one call.
struct MatmulCall {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~MatmulCall() {
    if (pref) cublaslt().MatmulPreferenceDestroy(pref);
    if (d) cublaslt().MatrixLayoutDestroy(d);
    if (b) cublaslt().MatrixLayoutDestroy(b);
    if (a) cublaslt().MatrixLayoutDestroy(a);
    if (op) cublaslt().MatmulDescDestroy(op);
  }
};

// Column-major D [m, n] (leading dimension ldd) = alpha op(A) op(B) + beta D, `batch` times,
// optionally + bias [m] broadcast over the n columns (BIAS epilogue).
template <class T, class Out>
void matmul_column_major(const KernelContext& ctx, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                         const T* A, int lda, long long stride_a, const T* B, int ldb, long long stride_b, float beta,
                         Out* D, int ldd, long long stride_d, int batch, const Out* bias) {
  if (m == 0 || n == 0 || batch == 0) return;
  MatmulCall call;
  const bool tf32 = std::is_same_v<T, float> && ctx.allow_tf32;
  static_assert(std::is_same_v<Out, T> || std::is_same_v<Out, float>, "output: the input type or fp32");
  const cublasComputeType_t compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  MEMTRAIN_CUBLAS_CHECK(cublaslt().MatmulDescCreate(&call.op, compute, CUDA_R_32F));
  const cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  MEMTRAIN_CUBLAS_CHECK(cublaslt().MatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  MEMTRAIN_CUBLAS_CHECK(cublaslt().MatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  if (bias != nullptr) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    MEMTRAIN_CUBLAS_CHECK(
        cublaslt().MatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    MEMTRAIN_CUBLAS_CHECK(
        cublaslt().MatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  }
  const cudaDataType_t type = data_type<T>();
  MEMTRAIN_CUBLAS_CHECK(cublaslt().MatrixLayoutCreate(&call.a, type, trans_a ? k : m, trans_a ? m : k, lda));
  MEMTRAIN_CUBLAS_CHECK(cublaslt().MatrixLayoutCreate(&call.b, type, trans_b ? n : k, trans_b ? k : n, ldb));
  MEMTRAIN_CUBLAS_CHECK(cublaslt().MatrixLayoutCreate(&call.d, data_type<Out>(), m, n, ldd));
  if (batch > 1) {
    const std::int32_t count = batch;
    const std::int64_t strides[3] = {stride_a, stride_b, stride_d};
    cublasLtMatrixLayout_t layouts[3] = {call.a, call.b, call.d};
    for (int i = 0; i < 3; ++i) {
      MEMTRAIN_CUBLAS_CHECK(
          cublaslt().MatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
      MEMTRAIN_CUBLAS_CHECK(cublaslt().MatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                                &strides[i], sizeof strides[i]));
    }
  }
  MEMTRAIN_CUBLAS_CHECK(cublaslt().MatmulPreferenceCreate(&call.pref));
  const std::size_t ws = ctx.blas_workspace_bytes;
  MEMTRAIN_CUBLAS_CHECK(
      cublaslt().MatmulPreferenceSetAttribute(call.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  // The heuristic assumes 256-byte aligned operands unless told otherwise; odd offsets into a
  // flat buffer (a bucket view, a row slice) would then pick a kernel that faults.
  const std::uint32_t align_a = alignment_of(A), align_b = alignment_of(B), align_d = alignment_of(D);
  MEMTRAIN_CUBLAS_CHECK(cublaslt().MatmulPreferenceSetAttribute(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                                &align_a, sizeof align_a));
  MEMTRAIN_CUBLAS_CHECK(cublaslt().MatmulPreferenceSetAttribute(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                                &align_b, sizeof align_b));
  MEMTRAIN_CUBLAS_CHECK(cublaslt().MatmulPreferenceSetAttribute(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                                &align_d, sizeof align_d));
  MEMTRAIN_CUBLAS_CHECK(cublaslt().MatmulPreferenceSetAttribute(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                                &align_d, sizeof align_d));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  MEMTRAIN_CUBLAS_CHECK(cublaslt().MatmulAlgoGetHeuristic(ctx.blas, call.op, call.a, call.b, call.d, call.d, call.pref,
                                                          1, &result, &found));
  if (found == 0) {
    throw memory::CudaError("cublasLtMatmulAlgoGetHeuristic: no algorithm for m=" + std::to_string(m) +
                            " n=" + std::to_string(n) + " k=" + std::to_string(k) + " batch=" + std::to_string(batch));
  }
  MEMTRAIN_CUBLAS_CHECK(cublaslt().Matmul(ctx.blas, call.op, &alpha, A, call.a, B, call.b, &beta, D, call.d, D, call.d,
                                          &result.algo, ctx.blas_workspace, ws, ctx.stream));
}

}  // namespace

// Row-major C [M, N] = op(A) op(B) is column-major C^T [N, M] = op(B)^T op(A)^T, and a row-major
// matrix stored with row stride ld is its own transpose in column-major with leading dimension
// ld: so B's storage comes first, each operand keeps its own transpose flag, and the bias over
// C's N columns is the column-major bias over rows.
template <class T>
void matmul_strided_batched(const KernelContext& ctx, T* C, const T* A, const T* B, int batch, int M, int N, int K,
                            bool trans_a, bool trans_b, long long stride_a, long long stride_b, long long stride_c,
                            int lda, int ldb, int ldc, float alpha, float beta, const T* bias) {
  matmul_column_major<T, T>(ctx, trans_b, trans_a, N, M, K, alpha, B, ldb, stride_b, A, lda, stride_a, beta, C, ldc,
                            stride_c, batch, bias);
}

template <class T>
void matmul_strided_batched_f32_out(const KernelContext& ctx, float* C, const T* A, const T* B, int batch, int M, int N,
                                    int K, bool trans_a, bool trans_b, long long stride_a, long long stride_b,
                                    long long stride_c, int lda, int ldb, int ldc, float alpha, float beta) {
  matmul_column_major<T, float>(ctx, trans_b, trans_a, N, M, K, alpha, B, ldb, stride_b, A, lda, stride_a, beta, C, ldc,
                                stride_c, batch, nullptr);
}

#define MEMTRAIN_INSTANTIATE(T)                                                                                    \
  template void matmul_strided_batched<T>(const KernelContext&, T*, const T*, const T*, int, int, int, int, bool,  \
                                          bool, long long, long long, long long, int, int, int, float, float,      \
                                          const T*);                                                               \
  template void matmul_strided_batched_f32_out<T>(const KernelContext&, float*, const T*, const T*, int, int, int, \
                                                  int, bool, bool, long long, long long, long long, int, int, int, \
                                                  float, float);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(__nv_bfloat16)
MEMTRAIN_INSTANTIATE(__half)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels::gpu
