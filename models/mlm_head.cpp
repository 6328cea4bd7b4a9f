#include "models/mlm_head.hpp"

#include <cstring>

#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/linear.hpp"
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
  auto gathered = Tensor::empty(s.ctx, {M, C}, DType::f32, act);  // [M, C]
  if (s.compute()) {
    const float* h = hidden.data<float>();
    float* g = gathered.data<float>();
    for (int m = 0; m < M; ++m) {
      std::memcpy(g + long{m} * C, h + long{positions[m]} * C, sizeof(float) * C);
    }
  }
  auto pre_gelu = Tensor::empty(s.ctx, {M, C}, DType::f32, act);  // [M, C]
  dense_.forward(s, pre_gelu.data<float>(), gathered.data<float>(), M, /*with_bias=*/false);
  auto gelu = Tensor::empty(s.ctx, {M, C}, DType::f32, act);  // [M, C]
  if (s.compute()) {
    kernels::bias_gelu_forward(gelu.data<float>(), pre_gelu.data<float>(),
                               dense_.bias().value.data<float>(), M, C);
  }
  auto transformed = layer_norm_.forward(s, gelu, M);  // [M, C]
  gelu.reset();
  auto logits = Tensor::empty(s.ctx, {M, V_}, DType::f32, act);  // [M, V]
  if (s.compute()) {
    kernels::linear_forward(logits.data<float>(), transformed.data<float>(),
                            word_.value.data<float>(), bias_.value.data<float>(), M, C, V_);
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
    loss = kernels::softmax_cross_entropy_forward_backward(
        dlogits.data<float>(), dlogits.data<float>(), labels.data(), M, V_, grad_scale, &correct);
  }
  stats->loss_sum += loss;
  stats->num_masked += M;
  stats->num_correct += correct;
  return dlogits;
}

Tensor MlmHead::backward(PassState& s, Tensor dlogits, const std::vector<std::int32_t>& positions) {
  const int M = static_cast<int>(positions.size()), C = C_;
  const auto tmp = core::tags().temporary;
  auto dtransformed = Tensor::zeros(s.ctx, {M, C}, DType::f32, tmp);  // [M, C]
  if (s.compute()) {
    // Tied decoder: its weight gradient lands in the word-embedding gradient.
    kernels::linear_backward(dtransformed.data<float>(), word_.grad.data<float>(),
                             bias_.grad.data<float>(), dlogits.data<float>(),
                             transformed_.data<float>(), word_.value.data<float>(), M, C, V_);
  }
  dlogits.reset();
  transformed_.reset();
  auto dgelu = Tensor::zeros(s.ctx, {M, C}, DType::f32, tmp);  // [M, C]
  layer_norm_.backward(s, dgelu.data<float>(), dtransformed.data<float>(), M);
  dtransformed.reset();
  auto dpre = Tensor::zeros(s.ctx, {M, C}, DType::f32, tmp);  // [M, C]
  if (s.compute()) {
    kernels::bias_gelu_backward(dpre.data<float>(), dense_.bias().grad.data<float>(),
                                dgelu.data<float>(), pre_gelu_.data<float>(),
                                dense_.bias().value.data<float>(), M, C);
  }
  dgelu.reset();
  pre_gelu_.reset();
  auto dgathered = Tensor::zeros(s.ctx, {M, C}, DType::f32, tmp);  // [M, C]
  dense_.backward(s, dgathered.data<float>(), dpre.data<float>(), gathered_.data<float>(), M,
                  /*with_bias=*/false);
  dpre.reset();
  gathered_.reset();

  auto dhidden = Tensor::zeros(s.ctx, {s.B, s.T, C}, DType::f32, tmp);  // [B, T, C]
  if (s.compute()) {
    float* dh = dhidden.data<float>();
    const float* dg = dgathered.data<float>();
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
