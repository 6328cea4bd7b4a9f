#include "models/bert_embeddings.hpp"

#include "kernels/cpu/dropout.hpp"
#include "kernels/cpu/embedding.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::models {

BertEmbeddings::BertEmbeddings(ParameterSet& params, const BertConfig& c)
    : word_(params.add("bert.embeddings.word_embeddings.weight", {c.vocab_size, c.hidden_size},
                       ParameterInit::normal, true)),
      position_(params.add("bert.embeddings.position_embeddings.weight",
                           {c.max_position_embeddings, c.hidden_size}, ParameterInit::normal,
                           true)),
      token_type_(params.add("bert.embeddings.token_type_embeddings.weight",
                             {c.type_vocab_size, c.hidden_size}, ParameterInit::normal, true)),
      layer_norm_(params, "bert.embeddings.LayerNorm", c.hidden_size, c.layer_norm_eps),
      V_(c.vocab_size),
      TV_(c.type_vocab_size),
      C_(c.hidden_size) {}

core::Tensor BertEmbeddings::forward(PassState& s, const std::int32_t* ids,
                                     const std::int32_t* type_ids) {
  const int N = s.N();
  auto sum = core::Tensor::empty(s.ctx, {s.B, s.T, C_}, core::DType::f32,
                                 core::tags().activation);  // [B, T, C]
  if (s.compute()) {
    kernels::bert_embeddings_forward(sum.data<float>(), ids, type_ids, word_.value.data<float>(),
                                     position_.value.data<float>(), token_type_.value.data<float>(),
                                     s.B, s.T, C_, V_, TV_);
  }
  auto out = layer_norm_.forward(s, sum, N);  // [B*T, C]
  sum.reset();
  if (s.compute() && s.hidden_dropout > 0.0f) {
    kernels::dropout_forward(out.data<float>(), out.data<float>(), s.B, long{s.T} * C_,
                             s.hidden_dropout, s.key(kEmbeddingsLayer, kEmbeddingsOutput),
                             s.first_sample);
  }
  if (s.training) {
    ids_ = ids;
    type_ids_ = type_ids;
  }
  return out;
}

void BertEmbeddings::backward(PassState& s, core::Tensor& dout) {
  const int N = s.N();
  if (s.compute() && s.hidden_dropout > 0.0f) {
    kernels::dropout_backward(dout.data<float>(), dout.data<float>(), s.B, long{s.T} * C_,
                              s.hidden_dropout, s.key(kEmbeddingsLayer, kEmbeddingsOutput),
                              s.first_sample);
  }
  auto dsum = core::Tensor::zeros(s.ctx, {s.B, s.T, C_}, core::DType::f32,
                                  core::tags().temporary);  // [B, T, C]
  layer_norm_.backward(s, dsum.data<float>(), dout.data<float>(), N);
  if (s.compute()) {
    kernels::bert_embeddings_backward(word_.grad.data<float>(), position_.grad.data<float>(),
                                      token_type_.grad.data<float>(), dsum.data<float>(), ids_,
                                      type_ids_, s.B, s.T, C_);
  }
  ids_ = type_ids_ = nullptr;
}

}  // namespace memtrain::models
