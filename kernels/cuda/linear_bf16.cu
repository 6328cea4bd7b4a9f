#include "kernels/cuda/linear_bf16.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/column_reduce.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/dtype_traits.cuh"
#include "kernels/cuda/matmul.hpp"
#include "kernels/cuda/rows.hpp"

namespace memtrain::kernels::gpu {
namespace {

// dbias[c] += sum_n dout[n, c] in fp32 from bf16 rows (linear.cu's column sums, a float target).
__global__ void column_sum_accumulate_f32(float* dbias, const __nv_bfloat16* dout, int N, int OC) {
  __shared__ float shared[kRowGroups][kColumns];
  const int c = blockIdx.x * kColumns + threadIdx.x;
  float partial = 0.0f;
  if (c < OC) {
    for (int n = threadIdx.y; n < N; n += kRowGroups) {
      partial += __bfloat162float(dout[static_cast<long long>(n) * OC + c]);
    }
  }
  const float s = reduce_row_groups(partial, shared);
  if (threadIdx.y == 0 && c < OC) dbias[c] = __fadd_rn(dbias[c], s);
}

// dst[i] = bf16(accumulate ? float(dst[i]) + src[i] : src[i]): one rounding of the fp32 sum, as
// kernels/cpu/linear_bf16 rounds a bf16 weight gradient.
__global__ void round_into_bf16(__nv_bfloat16* dst, const float* src, long long n, bool accumulate) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const float v = accumulate ? __fadd_rn(__bfloat162float(dst[i]), src[i]) : src[i];
    dst[i] = __ushort_as_bfloat16(bf16_bits_from_float(v));
  }
}

}  // namespace

void linear_forward_bf16(const KernelContext& ctx, float* out, const __nv_bfloat16* inp, const __nv_bfloat16* weight,
                         const float* bias, int N, int C, int OC) {
  // out [N, OC] = inp [N, C] . weight^T, weight stored [OC, C]; then + bias in each row, as the
  // CPU adds it after its GEMM.
  matmul_strided_batched_f32_out(ctx, out, inp, weight, 1, N, OC, C, false, true, 0, 0, 0, C, C, OC, 1.0f, 0.0f);
  if (bias != nullptr) add_bias(ctx, out, bias, N, OC);
}

void linear_backward_bf16(const KernelContext& ctx, float* dinp, void* dweight, bool dweight_bf16,
                          bool dweight_accumulate, float* dbias, const __nv_bfloat16* dout, const __nv_bfloat16* inp,
                          const __nv_bfloat16* weight, int N, int C, int OC) {
  // dinp [N, C] += dout [N, OC] . weight [OC, C]
  if (dinp != nullptr) {
    matmul_strided_batched_f32_out(ctx, dinp, dout, weight, 1, N, C, OC, false, false, 0, 0, 0, OC, C, C, 1.0f, 1.0f);
  }
  // dweight [OC, C] (+)= dout^T [OC, N] . inp [N, C]
  if (dweight != nullptr && !dweight_bf16) {
    matmul_strided_batched_f32_out(ctx, static_cast<float*>(dweight), dout, inp, 1, OC, C, N, true, false, 0, 0, 0, OC,
                                   C, C, 1.0f, dweight_accumulate ? 1.0f : 0.0f);
  } else if (dweight != nullptr && OC > 0 && C > 0) {
    long long rows_per_block = static_cast<long long>(ctx.scratch_bytes / sizeof(float)) / C;
    // Multiples of 8 rows keep every block's dout + r0 16-byte aligned for cuBLASLt's fast kernels.
    if (rows_per_block >= 8) rows_per_block -= rows_per_block % 8;
    if (rows_per_block < 1) {
      throw std::invalid_argument("linear_backward_bf16: scratch of " + std::to_string(ctx.scratch_bytes) +
                                  " bytes holds no row of " + std::to_string(C) + " floats");
    }
    auto* scratch = static_cast<float*>(ctx.scratch);
    auto* dw = static_cast<__nv_bfloat16*>(dweight);
    for (long long r0 = 0; r0 < OC; r0 += rows_per_block) {
      const int rows = static_cast<int>(std::min<long long>(rows_per_block, OC - r0));
      // scratch [rows, C] = dout[:, r0 : r0 + rows]^T . inp: columns r0.. of dout's rows.
      matmul_strided_batched_f32_out(ctx, scratch, dout + r0, inp, 1, rows, C, N, true, false, 0, 0, 0, OC, C, C, 1.0f,
                                     0.0f);
      const long long n = static_cast<long long>(rows) * C;
      round_into_bf16<<<blocks_for(n, 256), 256, 0, ctx.stream>>>(dw + r0 * C, scratch, n, dweight_accumulate);
      MEMTRAIN_CUDA_CHECK_LAUNCH();
    }
  }
  if (dbias != nullptr && OC > 0) {
    column_sum_accumulate_f32<<<(OC + kColumns - 1) / kColumns, dim3(kColumns, kRowGroups), 0, ctx.stream>>>(
        dbias, dout, N, OC);
    MEMTRAIN_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace memtrain::kernels::gpu
