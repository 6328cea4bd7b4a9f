#pragma once
// Row-wise adds, gathers and scatters through the op API: kernels/cpu/rows or kernels/cuda/rows,
// with their contracts (bitwise the same on both). On the GPU every pointer, `rows` included,
// is device memory.
#include <cstdint>

#include "kernels/op_context.hpp"

namespace memtrain::kernels::ops {

// out [N, C] += bias [C] in each row.
void add_bias(const OpContext& kc, float* out, const float* bias, std::int64_t N, std::int64_t C);

// y [n] += x [n].
void add_inplace(const OpContext& kc, float* y, const float* x, std::int64_t n);

// dst row m [row_bytes] = src row rows[m], or zeros where rows[m] < 0; rows [M]. On the GPU
// row_bytes must be even (std::invalid_argument).
void gather_rows(const OpContext& kc, void* dst, const void* src, const std::int32_t* rows, std::int64_t M,
                 std::int64_t row_bytes);

// dst row rows[m] [C] += src row m where rows[m] >= 0; the non-negative rows must be distinct.
void scatter_add_rows(const OpContext& kc, float* dst, const float* src, const std::int32_t* rows, std::int64_t M,
                      std::int64_t C);

}  // namespace memtrain::kernels::ops
