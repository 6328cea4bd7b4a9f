#pragma once
// The op profile's rows for the layers' kernel calls (Note [Profiling ops in the step],
// runtime/core/op_profile.hpp): shape texts, model FLOPs and minimal bytes, all counted in f32
// elements since the kernels compute in float.
#include <cstdint>
#include <string>

#include "runtime/core/op_profile.hpp"

namespace memtrain::models {

// out [N, out] = inp [N, in] x weight [out, in]^T: 2 N in out FLOPs per pass; the backward
// pass is two such products (dinp and dweight), one when dinp is not wanted.
inline core::ScopedOp::Description gemm_description(std::int64_t N, std::int64_t in, std::int64_t out, int products) {
  std::string shape = "[";
  shape += std::to_string(N) + ", " + std::to_string(in) + "] x [" + std::to_string(out) + ", " + std::to_string(in);
  shape += "]^T";
  return {shape, 2.0 * static_cast<double>(products) * static_cast<double>(N * in * out), 0.0};
}

// The MLM head's products over the M masked positions of a micro-batch: one row of the profile
// whatever M is ("[masked, in] x [out, in]^T"), its FLOPs those of the calls' own M.
inline core::ScopedOp::Description masked_gemm_description(std::int64_t M, std::int64_t in, std::int64_t out,
                                                           int products) {
  auto d = gemm_description(M, in, out, products);
  d.shape = "[masked" + d.shape.substr(d.shape.find(','));
  return d;
}

// An op over `rows` x `cols` f32 elements that reads and writes `passes` arrays of that size.
inline core::ScopedOp::Description elementwise_description(std::int64_t rows, std::int64_t cols, int passes) {
  std::string shape = "[";
  shape += std::to_string(rows) + ", " + std::to_string(cols) + "]";
  return {shape, 0.0, 4.0 * static_cast<double>(passes) * static_cast<double>(rows * cols)};
}

// elementwise_description over the M masked positions, one row of the profile whatever M is.
inline core::ScopedOp::Description masked_elementwise_description(std::int64_t M, std::int64_t cols, int passes) {
  auto d = elementwise_description(M, cols, passes);
  d.shape = "[masked" + d.shape.substr(d.shape.find(','));
  return d;
}

// The attention core over [B, NH, T, T] scores of C / NH-wide heads: Q K^T and P V are
// 2 B T^2 C FLOPs each forward (4 B T^2 C), twice that backward.
inline core::ScopedOp::Description attention_description(std::int64_t B, std::int64_t NH, std::int64_t T,
                                                         std::int64_t C, int products) {
  std::string shape = "[";
  shape += std::to_string(B) + ", " + std::to_string(NH) + ", " + std::to_string(T) + ", " + std::to_string(T);
  shape += "] heads of " + std::to_string(C / NH);
  return {shape, 2.0 * static_cast<double>(products) * static_cast<double>(B * T * T * C), 0.0};
}

}  // namespace memtrain::models
