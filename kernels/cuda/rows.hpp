#pragma once
// Row-wise adds, gathers and scatters on the GPU: the CUDA twins of kernels/cpu/rows.hpp, with
// its contracts, bitwise its results (each element one float add). `rows` is device memory.
#include <cstdint>

#include "kernels/cuda/kernel_context.hpp"

namespace memtrain::kernels::gpu {

// out [N, C] += bias [C] in each row. Asynchronous on ctx.stream.
void add_bias(const KernelContext& ctx, float* out, const float* bias, std::int64_t N, std::int64_t C);

// y [n] += x [n].
void add_inplace(const KernelContext& ctx, float* y, const float* x, std::int64_t n);

// dst row m = src row rows[m] (row_bytes each, a multiple of 2: throws std::invalid_argument
// otherwise), zeros where rows[m] < 0.
void gather_rows(const KernelContext& ctx, void* dst, const void* src, const std::int32_t* rows, std::int64_t M,
                 std::int64_t row_bytes);

// dst row rows[m] += src row m where rows[m] >= 0; the non-negative rows distinct (no atomics).
void scatter_add_rows(const KernelContext& ctx, float* dst, const float* src, const std::int32_t* rows, std::int64_t M,
                      std::int64_t C);

}  // namespace memtrain::kernels::gpu
