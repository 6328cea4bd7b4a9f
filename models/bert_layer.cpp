#include "models/bert_layer.hpp"

namespace memtrain::models {

BertLayer::BertLayer(ParameterSet& params, int layer, const BertConfig& config)
    : attention_(params, "bert.encoder.layer." + std::to_string(layer) + ".attention", layer,
                 config),
      mlp_(params, "bert.encoder.layer." + std::to_string(layer), layer, config) {}

core::Tensor BertLayer::forward(PassState& s, const core::Tensor& x) {
  auto a = attention_.forward(s, x);
  return mlp_.forward(s, a);
}

core::Tensor BertLayer::backward(PassState& s, const core::Tensor& dout) {
  auto da = mlp_.backward(s, dout);
  return attention_.backward(s, da);
}

void BertLayer::release() {
  attention_.release();
  mlp_.release();
}

}  // namespace memtrain::models
