#include "models/linear.hpp"
#include "models/op_descriptions.hpp"

#include <optional>

#include "kernels/ops/half_convert.hpp"
#include "kernels/ops/linear.hpp"
#include "kernels/ops/rows.hpp"
#include "models/f32_access.hpp"
#include "runtime/core/workspace.hpp"

namespace memtrain::models {

namespace {

int shard_size(int n, LinearParallel parallel, LinearParallel split, const TensorParallel& tp) {
  return parallel == split ? n / tp.size() : n;
}

}  // namespace

Linear::Linear(ParameterSet& params, const std::string& name, int in_features, int out_features,
               LinearParallel parallel, const TensorParallel& tp)
    : in_(shard_size(in_features, parallel, LinearParallel::row, tp)),
      out_(shard_size(out_features, parallel, LinearParallel::column, tp)) {
  ShardSpec w, b;
  if (!tp.enabled()) {
    // A group of one: the whole tensor, replicated (nothing to shard).
  } else if (parallel == LinearParallel::column) {
    w = ShardSpec{Sharding::dim0, std::int64_t{tp.rank()} * out_, out_features, out_features};
    b = w;
  } else if (parallel == LinearParallel::row) {
    w = ShardSpec{Sharding::dim1, std::int64_t{tp.rank()} * in_, in_features, in_features};
  }
  weight_ = params.add(name + ".weight", {out_, in_}, ParameterInit::normal,
                       /*weight_decay=*/true, w);
  bias_ = params.add(name + ".bias", {out_}, ParameterInit::zeros, /*weight_decay=*/false, b);
}

Bf16Operand::Bf16Operand(const PassState& s, const float* x, std::int64_t n)
    : lease_(s.ctx.workspace(), static_cast<std::size_t>((n + 1) / 2)) {
  // Values read from a bf16 tensor survive the round trip exactly; a float sum not yet
  // rounded (a gradient view) is rounded here, as storing it would.
  const core::ScopedOp op(s.ctx.op_profile(), "convert.from_f32", [&] {
    return core::ScopedOp::Description{"bf16 GEMM operand", 0.0, static_cast<double>(n) * 6.0};
  });
  // In the context's workspace with its conversion: host scratch on the CPU, the device's on a
  // GPU (Note [Float views convert on the tensor's device]).
  kernels::ops::convert_float_to_half(s.kc(), reinterpret_cast<std::uint16_t*>(lease_.data()), x, n,
                                      kernels::HalfFormat::bf16);
}

namespace {

// A 16-bit tensor's bit patterns; null when undefined.
const std::uint16_t* half_bits(const core::Tensor& t) {
  return t.defined() ? static_cast<const std::uint16_t*>(raw_bytes(t)) : nullptr;
}

// An input's bf16 operand: the tensor's own bits when it is a bf16 tensor, else its float
// view rounded into `rounded`.
const std::uint16_t* bf16_operand(const PassState& s, const GemmInput& in, std::int64_t n,
                                  std::optional<Bf16Operand>& rounded) {
  if (in.tensor() != nullptr && in.tensor()->dtype() == core::DType::bf16) return half_bits(*in.tensor());
  F32View view;
  if (in.view() == nullptr) view = F32View(s.ctx, *in.tensor(), F32Access::read);
  rounded.emplace(s, in.view() != nullptr ? in.view() : view.get(), n);
  return rounded->data();
}

// A 16-bit weight the sgemm path reads a block at a time (Note [16-bit weights a block at a
// time]): every 16-bit weight but a bf16 one that oneDNN multiplies as stored.
// On a GPU the weight goes through a float view instead (Note [Float views convert on the
// tensor's device]): the blockwise kernels are the CPU's.
bool blockwise_half_weight(const PassState& s, const core::Tensor& weight) {
  return is_half(weight.dtype()) && !(s.native_bf16_gemm && weight.dtype() == core::DType::bf16) &&
         s.kc().device == kernels::Device::cpu;
}

// An input's float pointer: its view, or a read view of its tensor made into `view`.
const float* floats(const PassState& s, const GemmInput& in, F32View& view) {
  if (in.view() != nullptr) return in.view();
  view = F32View(s.ctx, *in.tensor(), F32Access::read);
  return view.get();
}

}  // namespace

void linear_forward(const PassState& s, float* out, const GemmInput& inp, const core::Tensor& weight,
                    const core::Tensor& bias, int N, int C, int OC) {
  if (s.native_bf16_gemm && weight.dtype() == core::DType::bf16) {
    std::optional<Bf16Operand> rounded;
    const std::uint16_t* x = bf16_operand(s, inp, std::int64_t{N} * C, rounded);  // [N, C]
    kernels::ops::linear_forward_bf16(s.kc(), out, x, half_bits(weight), read_f32(s.ctx, bias).get(), N, C, OC);
    return;
  }
  F32View x_view;
  const float* x = floats(s, inp, x_view);  // [N, C]
  if (blockwise_half_weight(s, weight)) {
    auto scratch = s.ctx.workspace().lease(kernels::ops::linear_half_weight_scratch_elements(s.kc(), OC, C));
    kernels::ops::linear_forward_half_weight(s.kc(), out, x, half_bits(weight), read_f32(s.ctx, bias).get(), N, C, OC,
                                             half_format(weight.dtype()), scratch.data());
    return;
  }
  const auto w = read_f32(s.ctx, weight);  // [OC, C]
  kernels::ops::linear_forward(s.kc(), out, x, w.get(), read_f32(s.ctx, bias).get(), N, C, OC);
}

void linear_backward(const PassState& s, float* dinp, const GemmInput& dout, const GemmInput& inp,
                     const core::Tensor& weight, const core::Tensor& dweight, const core::Tensor& dbias, int N, int C,
                     int OC) {
  if (s.native_bf16_gemm && weight.dtype() == core::DType::bf16) {
    std::optional<Bf16Operand> dy_rounded, x_rounded;
    const std::uint16_t* dy = bf16_operand(s, dout, std::int64_t{N} * OC, dy_rounded);  // [N, OC]
    const std::uint16_t* x = bf16_operand(s, inp, std::int64_t{N} * C, x_rounded);      // [N, C]
    auto db = gradient_f32(s.ctx, dbias, s.grads_zero);                                 // [OC]
    kernels::ops::linear_backward_bf16(s.kc(), dinp, dweight.defined() ? raw_bytes(dweight) : nullptr,
                                       dweight.dtype() == core::DType::bf16, !s.grads_zero, db.get(), dy, x,
                                       half_bits(weight), N, C, OC);
    return;
  }
  F32View dy_view, x_view;
  const float* dy = floats(s, dout, dy_view);  // [N, OC]
  const float* x = floats(s, inp, x_view);     // [N, C]
  if (blockwise_half_weight(s, weight) && (!dweight.defined() || dweight.dtype() == weight.dtype())) {
    auto db = gradient_f32(s.ctx, dbias, s.grads_zero);  // [OC]
    auto scratch = s.ctx.workspace().lease(kernels::ops::linear_half_weight_scratch_elements(s.kc(), OC, C));
    auto* dw = dweight.defined() ? static_cast<std::uint16_t*>(raw_bytes(dweight)) : nullptr;  // [OC, C]
    kernels::ops::linear_backward_half_weight(s.kc(), dinp, dw, !s.grads_zero, db.get(), dy, x, half_bits(weight), N, C,
                                              OC, half_format(weight.dtype()), scratch.data());
    return;
  }
  const auto w = read_f32(s.ctx, weight);                // [OC, C]
  auto dw = gradient_f32(s.ctx, dweight, s.grads_zero);  // [OC, C]
  auto db = gradient_f32(s.ctx, dbias, s.grads_zero);    // [OC]
  kernels::ops::linear_backward(s.kc(), dinp, dw.get(), db.get(), dy, x, w.get(), N, C, OC);
}

void Linear::forward(const PassState& s, float* out, const GemmInput& inp, int N, bool with_bias) const {
  if (!s.compute()) return;
  const core::ScopedOp op(s.ctx.op_profile(), "gemm.forward", [&] { return gemm_description(N, in_, out_, 1); });
  linear_forward(s, out, inp, weight_.value, with_bias ? bias_.value : core::Tensor(), N, in_, out_);
}

void Linear::backward(const PassState& s, float* dinp, const GemmInput& dout, const GemmInput& inp, int N,
                      bool with_bias) {
  if (!s.compute()) return;
  const core::ScopedOp op(s.ctx.op_profile(), "gemm.backward",
                          [&] { return gemm_description(N, in_, out_, dinp ? 2 : 1); });
  linear_backward(s, dinp, dout, inp, weight_.value, weight_.grad, with_bias ? bias_.grad : core::Tensor(), N, in_,
                  out_);
}

void add_bias(const PassState& s, float* out, const Parameter& bias, int N) {
  if (!s.compute()) return;
  const auto b = read_f32(s.ctx, bias.value);  // [C]
  kernels::ops::add_bias(s.kc(), out, b.get(), N, bias.value.numel());
}

}  // namespace memtrain::models
