#include "models/mlm_head.hpp"

#include <cstring>

#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/linear.hpp"
#include "models/f32_access.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::models {

using core::DType;
using core::Tensor;

MlmHead::MlmHead(ParameterSet& params, const BertConfig& c, const Parameter& word_embeddings)
    : dense_(params, "cls.predictions.transform.dense", c.hidden_size, c.hidden_size),
      layer_norm_(params, "cls.predictions.transform.LayerNorm", c.hidden_size, c.layer_norm_eps),
      bias_(params.add("cls.predictions.bias", {c.vocab_size}, ParameterInit::zeros, false)),
      word_(word_embeddings),
      C_(c.hidden_size),
      V_(c.vocab_size) {}

Tensor MlmHead::logits(PassState& s, const Tensor& hidden,
                       const std::vector<std::int32_t>& positions) {
  const int M = static_cast<int>(positions.size()), C = C_;
  const auto act = core::tags().activation;
  auto gathered = Tensor::empty(s.ctx, {M, C}, s.dtype, act);  // [M, C]
  if (s.compute()) {
    // A row copy in the storage dtype (no conversion needed to move values).
    const std::size_t row = dtype_size(s.dtype) * C;
    const auto* h = static_cast<const char*>(raw_bytes(hidden));
    auto* g = static_cast<char*>(raw_bytes(gathered));
    for (int m = 0; m < M; ++m) std::memcpy(g + m * row, h + positions[m] * row, row);
  }
  auto pre_gelu = Tensor::empty(s.ctx, {M, C}, s.dtype, act);  // [M, C]
  dense_.forward(s, write_f32(s.ctx, pre_gelu).get(), read_f32(s.ctx, gathered).get(), M,
                 /*with_bias=*/false);
  auto gelu = Tensor::empty(s.ctx, {M, C}, s.dtype, act);  // [M, C]
  if (s.compute()) {
    kernels::bias_gelu_forward(write_f32(s.ctx, gelu).get(), read_f32(s.ctx, pre_gelu).get(),
                               read_f32(s.ctx, dense_.bias().value).get(), M, C);
  }
  auto transformed = layer_norm_.forward(s, gelu, M);  // [M, C]
  gelu.reset();
  auto logits = Tensor::empty(s.ctx, {M, V_}, s.dtype, act);  // [M, V]
  if (s.compute()) {
    kernels::linear_forward(write_f32(s.ctx, logits).get(), read_f32(s.ctx, transformed).get(),
                            read_f32(s.ctx, word_.value).get(), read_f32(s.ctx, bias_.value).get(),
                            M, C, V_);
  }
  if (s.training) {
    gathered_ = std::move(gathered);
    pre_gelu_ = std::move(pre_gelu);
    transformed_ = std::move(transformed);
  }
  return logits;
}

Tensor MlmHead::loss_backward(PassState& s, const Tensor& hidden,
                              const std::vector<std::int32_t>& positions,
                              const std::vector<std::int32_t>& labels, float grad_scale,
                              StepStats* stats) {
  return backward(s, loss(s, hidden, positions, labels, grad_scale, stats), positions);
}

Tensor MlmHead::loss(PassState& s, const Tensor& hidden, const std::vector<std::int32_t>& positions,
                     const std::vector<std::int32_t>& labels, float grad_scale, StepStats* stats) {
  const int M = static_cast<int>(positions.size());
  auto dlogits = logits(s, hidden, positions);  // [M, V]; overwritten by its gradient
  std::int64_t correct = 0;
  double loss = 0.0;
  if (s.compute()) {
    // The loss and its gradient in float (double sums inside the kernel) whatever the logits'
    // storage, as Megatron-LM computes cross-entropy in fp32.
    auto z = update_f32(s.ctx, dlogits);  // [M, V]
    loss = kernels::softmax_cross_entropy_forward_backward(z.get(), z.get(), labels.data(), M, V_,
                                                           grad_scale, &correct);
  }
  stats->loss_sum += loss;
  stats->num_masked += M;
  stats->num_correct += correct;
  return dlogits;
}

Tensor MlmHead::backward(PassState& s, Tensor dlogits, const std::vector<std::int32_t>& positions) {
  const int M = static_cast<int>(positions.size()), C = C_;
  const auto tmp = core::tags().temporary;
  auto dtransformed = Tensor::zeros(s.ctx, {M, C}, s.dtype, tmp);  // [M, C]
  if (s.compute()) {
    // Tied decoder: its weight gradient lands in the word-embedding gradient.
    auto dword = update_f32(s.ctx, word_.grad);  // [V, C]
    auto dbias = update_f32(s.ctx, bias_.grad);  // [V]
    kernels::linear_backward(update_f32(s.ctx, dtransformed).get(), dword.get(), dbias.get(),
                             read_f32(s.ctx, dlogits).get(), read_f32(s.ctx, transformed_).get(),
                             read_f32(s.ctx, word_.value).get(), M, C, V_);
  }
  dlogits.reset();
  transformed_.reset();
  auto dgelu = Tensor::zeros(s.ctx, {M, C}, s.dtype, tmp);  // [M, C]
  layer_norm_.backward(s, update_f32(s.ctx, dgelu).get(), read_f32(s.ctx, dtransformed).get(), M);
  dtransformed.reset();
  auto dpre = Tensor::zeros(s.ctx, {M, C}, s.dtype, tmp);  // [M, C]
  if (s.compute()) {
    auto dbias = update_f32(s.ctx, dense_.bias().grad);  // [C]
    kernels::bias_gelu_backward(update_f32(s.ctx, dpre).get(), dbias.get(),
                                read_f32(s.ctx, dgelu).get(), read_f32(s.ctx, pre_gelu_).get(),
                                read_f32(s.ctx, dense_.bias().value).get(), M, C);
  }
  dgelu.reset();
  pre_gelu_.reset();
  auto dgathered = Tensor::zeros(s.ctx, {M, C}, s.dtype, tmp);  // [M, C]
  dense_.backward(s, update_f32(s.ctx, dgathered).get(), read_f32(s.ctx, dpre).get(),
                  read_f32(s.ctx, gathered_).get(), M, /*with_bias=*/false);
  dpre.reset();
  gathered_.reset();

  auto dhidden = Tensor::zeros(s.ctx, {s.B, s.T, C}, s.dtype, tmp);  // [B, T, C]
  if (s.compute()) {
    auto dh_f = update_f32(s.ctx, dhidden);        // [B, T, C]
    const auto dg_f = read_f32(s.ctx, dgathered);  // [M, C]
    float* dh = dh_f.get();
    const float* dg = dg_f.get();
    for (int m = 0; m < M; ++m) {
      float* row = dh + long{positions[m]} * C;
      for (int c = 0; c < C; ++c) row[c] += dg[long{m} * C + c];
    }
  }
  return dhidden;
}

void MlmHead::release() {
  layer_norm_.release();
  gathered_.reset();
  pre_gelu_.reset();
  transformed_.reset();
}

}  // namespace memtrain::models
