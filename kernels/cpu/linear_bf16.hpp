#pragma once
// torch.nn.Linear on bf16 operands with fp32 accumulation (oneDNN: Note [bf16 GEMMs through
// oneDNN], matmul_bf16.hpp): the twin of linear.hpp for bf16 storage, used when
// bf16_gemm_native() says the CPU has bf16 dot products. Operands are bf16 bit patterns.
#include <cstdint>

namespace memtrain::kernels {

// out [N, OC] (f32) = inp [N, C] (bf16) weight [OC, C]^T (bf16) + bias [OC] (f32, or null).
// out is not read. Throws as matmul_bf16.
void linear_forward_bf16(float* out, const std::uint16_t* inp, const std::uint16_t* weight, const float* bias, int N,
                         int C, int OC);

// The gradients of linear_forward_bf16, from dout [N, OC] (bf16):
// dinp [N, C] (f32) += dout weight, skipped when null;
// dweight [OC, C] (bf16 when dweight_bf16, else f32) = dout^T inp, or += when
//   dweight_accumulate (the sum in fp32, rounded once), skipped when null;
// dbias [OC] (f32) += the column sums of dout, skipped when null (columns in parallel, rows in
//   order: Note [Column-block parallel reductions]).
// Throws as matmul_bf16.
void linear_backward_bf16(float* dinp, void* dweight, bool dweight_bf16, bool dweight_accumulate, float* dbias,
                          const std::uint16_t* dout, const std::uint16_t* inp, const std::uint16_t* weight, int N,
                          int C, int OC);

}  // namespace memtrain::kernels
