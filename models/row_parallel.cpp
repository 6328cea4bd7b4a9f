#include "models/row_parallel.hpp"

#include "kernels/ops/rows.hpp"
#include "models/f32_access.hpp"
#include "models/sequence_parallel.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"
#include "runtime/core/workspace.hpp"

namespace memtrain::models {

void row_parallel_forward(PassState& s, const TensorParallel& tp, const Linear& linear, const GemmInput& inp,
                          float* out) {
  const int B = s.B, T = s.T, N = s.N(), C = linear.out_features();
  if (!tp.enabled()) {
    linear.forward(s, out, inp, N);
    return;
  }
  if (tp.sp()) {
    auto partial = core::Tensor::empty(s.ctx, {B, T, C}, s.dtype, core::tags().temporary);
    auto p_f = write_f32(s.ctx, partial);  // [B, T, C]
    linear.forward(s, p_f.get(), inp, N, /*with_bias=*/false);
    reduce_scatter_sequence(s, tp, p_f.get(), out, C);  // g
    add_bias(s, out, linear.bias(), B * sequence_shard_length(tp, T));
    return;
  }
  linear.forward(s, out, inp, N, /*with_bias=*/false);
  if (s.compute()) tp.all_reduce(out, long{N} * C);  // g
  add_bias(s, out, linear.bias(), N);
}

void row_parallel_backward(PassState& s, const TensorParallel& tp, Linear& linear, float* dinp, const float* dout,
                           const GemmInput& inp) {
  const int B = s.B, T = s.T, N = s.N(), C = linear.out_features();
  if (!tp.sp()) {
    linear.backward(s, dinp, dout, inp, N);
    return;
  }
  auto gathered = core::Tensor::empty(s.ctx, {B, T, C}, s.dtype, core::tags().temporary);
  auto g_f = write_f32(s.ctx, gathered);  // [B, T, C]
  gather_sequence(s, tp, dout, g_f.get(), C);
  linear.backward(s, dinp, g_f.get(), inp, N);
}

void add_reduce_scattered(const PassState& s, const TensorParallel& tp, const float* full, float* shard, int C) {
  if (!s.compute()) return;
  if (s.kc().device != kernels::Device::cpu) {
    throw RuntimeError(
        "add_reduce_scattered: sequence parallelism stages through host memory; a GPU run has no "
        "tensor parallelism yet");
  }
  const long n = long{s.B} * sequence_shard_length(tp, s.T) * C;
  core::Workspace::Lease part(s.ctx.workspace(), static_cast<std::size_t>(n));
  reduce_scatter_sequence(s, tp, full, part.data(), C);  // f's backward
  kernels::ops::add_inplace(s.kc(), shard, part.data(), n);
}

}  // namespace memtrain::models
