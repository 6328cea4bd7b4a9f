#pragma once
// Linear layers on bf16 operands with fp32 accumulation and fp32 outputs, on tensor cores through
// cuBLASLt: the CUDA twins of kernels/cpu/linear_bf16.hpp (oneDNN there), with its contract, so
// that a bf16 GPU run's GEMMs take their operands as stored (issue 14: native 16-bit operands).
#include <cuda_bf16.h>

#include <cstddef>

#include "kernels/cuda/kernel_context.hpp"

namespace memtrain::kernels::gpu {

// out [N, OC] (f32) = inp [N, C] (bf16) weight [OC, C]^T (bf16) + bias [OC] (f32, or null). out is
// not read. Asynchronous on ctx.stream. Throws memory::CudaError when cuBLASLt fails.
void linear_forward_bf16(const KernelContext& ctx, float* out, const __nv_bfloat16* inp, const __nv_bfloat16* weight,
                         const float* bias, int N, int C, int OC);

// From dout [N, OC] (bf16):
// dinp [N, C] (f32) += dout weight, skipped when null;
// dweight [OC, C] (bf16 when dweight_bf16, else f32) = dout^T inp, or += when dweight_accumulate
//   (the sum in fp32, rounded once to nearest even), skipped when null. A bf16 dweight is
//   computed a block of rows at a time into ctx.scratch, which must hold at least one row of C
//   floats (std::invalid_argument otherwise);
// dbias [OC] (f32) += the column sums of dout (Note [Deterministic column sums]), skipped when
//   null.
void linear_backward_bf16(const KernelContext& ctx, float* dinp, void* dweight, bool dweight_bf16,
                          bool dweight_accumulate, float* dbias, const __nv_bfloat16* dout, const __nv_bfloat16* inp,
                          const __nv_bfloat16* weight, int N, int C, int OC);

// The scratch a bf16 dweight's blocks are best served with: 8 MiB (2048 rows of BERT-Large's
// 1024 columns, so its [30522, 1024] decoder weight takes 15 GEMMs).
inline constexpr std::size_t kLinearBf16ScratchBytes = std::size_t{8} << 20;

}  // namespace memtrain::kernels::gpu
