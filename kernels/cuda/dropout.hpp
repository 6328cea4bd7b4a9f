#pragma once
// Inverted dropout on the GPU: the CUDA twin of kernels/cpu/dropout.hpp, drawing the same
// Philox4x32-10 words from the same counters, so the GPU drops exactly the elements the CPU
// drops for the same RngKey (issue 14).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/kernel_context.hpp"
#include "kernels/philox.hpp"

namespace memtrain::kernels::gpu {

// out = inp * keep / (1 - p), keep = (word & 0xffffff00) >= ceil(p 2^24) << 8 where word is
// Philox word e & 3 of block (sample, e >> 2) (kernels/cpu/dropout.cpp's keep_threshold).
// The tensor is [rows, per_sample]; row r is sample first_sample + r and its element i has index
// first_element + i in that sample. p == 0 copies, p >= 1 zeroes; out may alias inp. Throws
// std::invalid_argument for p < 0 or NaN (before anything is queued).
template <class T>
void dropout_forward(const KernelContext& ctx, T* out, const T* inp, int rows, long per_sample, float p,
                     const RngKey& key, std::uint64_t first_sample, std::uint64_t first_element = 0);

// dinp = dout * keep / (1 - p) with the forward's mask (overwrites; may alias dout).
template <class T>
void dropout_backward(const KernelContext& ctx, T* dinp, const T* dout, int rows, long per_sample, float p,
                      const RngKey& key, std::uint64_t first_sample, std::uint64_t first_element = 0);

// out = dropout(inp) + residual (kernels/cpu/dropout.hpp's dropout_residual_forward): the same
// mask, the product and the sum each rounded to f32 (no fused multiply-add, as the CPU
// computes them), then to T once. p == 0 is the plain sum. out may alias inp, not residual.
// Throws std::invalid_argument unless 0 <= p < 1 (before anything is queued).
template <class T>
void dropout_residual_forward(const KernelContext& ctx, T* out, const T* inp, const T* residual, int rows,
                              long per_sample, float p, const RngKey& key, std::uint64_t first_sample,
                              std::uint64_t first_element = 0);

}  // namespace memtrain::kernels::gpu
