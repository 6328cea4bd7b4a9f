#pragma once
// torch.nn.Linear with its weight and weight gradient stored in 16 bits (f16, or bf16 where the
// CPU has no bf16 dot products) and fp32 activations: the weight is converted a block of rows at
// a time into per-thread scratch right before the sgemm that reads it, and the weight gradient is
// rounded a block at a time right after the sgemm that writes it (Note [16-bit weights a block
// at a time]); a weight of at most 2^22 elements is converted whole instead (Note [Small 16-bit
// weights convert whole]). The arithmetic is linear.hpp's: fp32 products and sums by OpenBLAS.
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/half_convert.hpp"

namespace memtrain::kernels {

// Floats of scratch linear_forward_half_weight and linear_backward_half_weight need for an
// [OC, C] weight on num_threads() threads: the whole weight as floats when it has at most 2^22
// elements (Note [Small 16-bit weights convert whole]); else per thread a block of at most 512
// weight rows and 3 MB, or 1024 rows of its share of the columns for the input gradient,
// whichever is more.
std::size_t linear_half_weight_scratch_elements(int OC, int C);

// out [N, OC] = inp [N, C] weight [OC, C]^T + bias [OC] (bias may be null; out is overwritten),
// weight the bit patterns of `format`. scratch: linear_half_weight_scratch_elements(OC, C)
// floats. Each element of out is an fp32 dot product over C of inp and the converted weight, as
// linear_forward's (equal to within rounding).
void linear_forward_half_weight(float* out, const float* inp, const std::uint16_t* weight, const float* bias, int N,
                                int C, int OC, HalfFormat format, float* scratch);

// From dout [N, OC]:
// dweight [OC, C] (bit patterns of `format`) = round(dout^T inp), or round(dweight + dout^T inp)
//   when dweight_accumulate: the sum in fp32, rounded once, as a float view of dweight would
//   (skipped when null);
// dinp [N, C] += dout weight, its sum over OC taken a block of weight rows at a time (the same
//   products as linear_backward, added in another order: equal to within rounding, and in an
//   order that depends on the thread count), skipped when null;
// dbias [OC] += the column sums of dout, skipped when null.
// scratch: linear_half_weight_scratch_elements(OC, C) floats.
void linear_backward_half_weight(float* dinp, std::uint16_t* dweight, bool dweight_accumulate, float* dbias,
                                 const float* dout, const float* inp, const std::uint16_t* weight, int N, int C, int OC,
                                 HalfFormat format, float* scratch);

}  // namespace memtrain::kernels
