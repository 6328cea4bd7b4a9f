#include "models/output_sublayer.hpp"

#include <cstdint>

#include "kernels/ops/copy.hpp"
#include "kernels/ops/dropout.hpp"
#include "models/op_descriptions.hpp"
#include "models/row_parallel.hpp"
#include "models/sequence_parallel.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::models {

using core::Tensor;

namespace {

// This rank's rows of the residual stream: Tl tokens of each sample (all T unless sequence
// parallel), and the flat index of its first element inside a sample (the dropout mask's
// element index, Note [Dropout keys]).
struct Rows {
  int Tl;
  std::uint64_t first_element;
};

Rows residual_rows(const TensorParallel& tp, int T, int C) {
  if (!tp.sp()) return {T, 0};
  return {sequence_shard_length(tp, T), std::uint64_t(sequence_shard_first(tp, T)) * C};
}

}  // namespace

OutputSublayer::OutputSublayer(ParameterSet& params, const std::string& prefix, int in_features, int hidden_size,
                               float layer_norm_eps, int layer, DropoutSite site, const TensorParallel& tp)
    : dense_(params, prefix + ".dense", in_features, hidden_size, LinearParallel::row, tp),
      layer_norm_(params, prefix + ".LayerNorm", hidden_size, layer_norm_eps),
      tp_(tp),
      layer_(layer),
      site_(site),
      C_(hidden_size) {}

Tensor OutputSublayer::forward(PassState& s, const Tensor& input, F32View input_f, const float* x_f) {
  const int B = s.B, C = C_;
  const auto [Tl, first_element] = residual_rows(tp_, s.T, C);
  const int Nl = B * Tl;
  // The residual sum is the LayerNorm's input, which it keeps for its backward pass.
  auto residual = Tensor::empty(s.ctx, {B, Tl, C}, s.dtype, core::tags().activation);  // [B, Tl, C]
  // Projection, dropout and residual add in one float view, rounded once (as a fused kernel).
  // Under tensor parallelism the row-parallel projection gives partial sums; g all-reduces them
  // in the float view (the f32 staging of 16-bit activations), or reduce-scatters them onto the
  // shard, and the bias, held whole on every rank, is added once after the sum.
  auto r_f = write_f32(s.ctx, residual);                                             // [B, Tl, C]
  row_parallel_forward(s, tp_, dense_, GemmInput(input_f.get(), input), r_f.get());  // g
  input_f = F32View();                                                               // its workspace slot back
  if (s.compute()) {
    const core::ScopedOp op(s.ctx.op_profile(), "dropout_residual.forward",
                            [&] { return elementwise_description(Nl, C, 3); });
    kernels::ops::dropout_residual_forward(s.kc(), r_f.get(), r_f.get(), x_f, B, long{Tl} * C, s.hidden_dropout,
                                           s.key(encoder_rng_layer(layer_), site_), s.first_sample, first_element);
  }
  // The LayerNorm reads the residual's floats as stored (Note [Views rounded in place]).
  r_f.round_in_place();
  return layer_norm_.forward(s, residual, Nl, r_f.get());  // [B, Tl, C]
}

OutputSublayer::ResidualGradient OutputSublayer::backward_residual(PassState& s, const Tensor& dout) {
  const int B = s.B, C = C_;
  const int Tl = residual_rows(tp_, s.T, C).Tl;
  const auto tmp = core::tags().temporary;
  // dx starts as the residual branch's gradient d(residual); the caller adds the rest of x's.
  ResidualGradient g;
  g.dx = Tensor::empty(s.ctx, {B, Tl, C}, s.dtype, tmp);  // [B, Tl, C]
  g.dx_f = zeroed_f32(s.ctx, g.dx);                       // [B, Tl, C]
  layer_norm_.backward(s, g.dx_f.get(), read_f32(s.ctx, dout).get(), B * Tl);
  dproj_ = Tensor::empty(s.ctx, {B, Tl, C}, s.dtype, tmp);  // [B, Tl, C]
  return g;
}

void OutputSublayer::backward_input(PassState& s, const float* dx_f, const Tensor& input, const Tensor& dinput,
                                    F32View* dinput_f) {
  const int B = s.B, C = C_;
  const auto [Tl, first_element] = residual_rows(tp_, s.T, C);
  const int Nl = B * Tl;
  {
    // Scratch: dproj is freed below unread in 16 bits, so its floats are never rounded back.
    auto dproj_f = scratch_f32(s.ctx, dproj_);  // [B, Tl, C]
    if (s.compute()) {
      if (s.hidden_dropout > 0.0f) {
        const core::ScopedOp op(s.ctx.op_profile(), "dropout.backward",
                                [&] { return elementwise_description(Nl, C, 2); });
        kernels::ops::dropout_backward(s.kc(), dproj_f.get(), dx_f, B, long{Tl} * C, s.hidden_dropout,
                                       s.key(encoder_rng_layer(layer_), site_), s.first_sample, first_element);
      } else {
        kernels::ops::copy_on_device(s.kc(), dproj_f.get(), dx_f, sizeof(float) * Nl * C);
      }
    }
    // g's backward: the identity, or with sequence parallelism the all-gather of the shard's
    // gradient (the bias gradient is then the whole sum on every rank).
    F32View own = dinput_f ? F32View() : zeroed_f32(s.ctx, dinput);  // [B, T, K/tp]
    row_parallel_backward(s, tp_, dense_, dinput_f ? dinput_f->get() : own.get(), dproj_f.get(), input);
  }
  dproj_.reset();
}

void OutputSublayer::release() {
  layer_norm_.release();
  dproj_.reset();
}

}  // namespace memtrain::models
