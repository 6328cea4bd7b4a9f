#pragma once
// Row-wise moves and sums that the layers used to write as host loops (issue 14): a bias added
// to every row, one buffer added into another, rows gathered by index and added back by index.
// Each has a CUDA twin in kernels/cuda/rows.hpp and is reached through kernels/ops/rows.hpp.
#include <cstdint>

namespace memtrain::kernels {

// out[n, c] += bias[c]. Shapes: out [N, C], bias [C]. Each element is one float add, so any
// order of rows gives the same bits.
void add_bias(float* out, const float* bias, std::int64_t N, std::int64_t C);

// y[i] += x[i]. Shapes: y, x [n]; x may equal y (doubling), must not overlap it otherwise.
void add_inplace(float* y, const float* x, std::int64_t n);

// dst row m = src row rows[m] (row_bytes bytes each, moved as stored: any dtype), or zeros when
// rows[m] < 0. Shapes: dst [M, row_bytes], src [max(rows) + 1, row_bytes], rows [M]. Never
// reads src outside the rows named; dst must not overlap src.
void gather_rows(void* dst, const void* src, const std::int32_t* rows, std::int64_t M, std::int64_t row_bytes);

// dst row rows[m] += src row m for every m with rows[m] >= 0; rows[m] < 0 is skipped. Shapes:
// dst [max(rows) + 1, C], src [M, C], rows [M]. The non-negative rows must be distinct (the
// masked positions are strictly ascending): the GPU twin adds without atomics.
void scatter_add_rows(float* dst, const float* src, const std::int32_t* rows, std::int64_t M, std::int64_t C);

}  // namespace memtrain::kernels
