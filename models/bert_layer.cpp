#include "models/bert_layer.hpp"

#include <string>

#include "runtime/core/errors.hpp"

namespace memtrain::models {

namespace {

std::string layer_prefix(int layer) { return "bert.encoder.layer." + std::to_string(layer); }

}  // namespace

BertLayer::BertLayer(ParameterSet& params, int layer, const BertConfig& config, const ModelOptions& options,
                     const TensorParallel& tp)
    : attention_(params, layer_prefix(layer) + ".attention", layer, config,
                 attention_core_kind(options, layer, config.num_hidden_layers), tp),
      mlp_(params, layer_prefix(layer), layer, config, tp),
      layer_(layer),
      checkpointed_(options.recompute == Recompute::full &&
                    recomputes_layer(options, layer, config.num_hidden_layers)) {}

void BertLayer::set_recompute(const ModelOptions& options, int num_layers) {
  if (x_.defined()) {
    throw RuntimeError("BertLayer::set_recompute: layer " + std::to_string(layer_) +
                       " still keeps its input for backward; change it between steps");
  }
  attention_.set_core_kind(attention_core_kind(options, layer_, num_layers));
  checkpointed_ = options.recompute == Recompute::full && recomputes_layer(options, layer_, num_layers);
}

// Note [Full recompute]
// Megatron-LM's full granularity (Korthikanti et al. 2022, sec. 4.1; Chen et al. 2016): a
// checkpointed layer's forward pass keeps only its input x (already an activation: the previous
// layer's output, so keeping it costs a handle, not a copy) and runs its sublayers as in
// evaluation, each freeing its intermediates as soon as the next op has consumed them. Its
// backward pass reruns the forward pass from x, this time saving, drops the rerun's output, and
// runs the ordinary backward. The rerun is bitwise the first run: the same kernels on the same
// inputs, and every dropout mask is a pure function of its key (Note [Dropout keys]), so the
// gradients equal those of an uncheckpointed layer bit for bit. Cost: one more forward pass of
// the layer; saving: all of the layer's activations but x, at the price of holding one layer's
// working set at a time during backward.
core::Tensor BertLayer::forward(PassState& s, const core::Tensor& x) {
  if (!(checkpointed_ && s.training)) {
    auto a = attention_.forward(s, x);
    return mlp_.forward(s, a);
  }
  PassState no_save = s;  // same dropout keys and probabilities, nothing kept for backward
  no_save.training = false;
  auto a = attention_.forward(no_save, x);
  auto out = mlp_.forward(no_save, a);
  x_ = x;
  return out;
}

core::Tensor BertLayer::backward(PassState& s, const core::Tensor& dout) {
  if (checkpointed_) {
    auto a = attention_.forward(s, x_);
    mlp_.forward(s, a);  // output equals forward's; only what it saved is needed
    x_.reset();
  }
  auto da = mlp_.backward(s, dout);
  return attention_.backward(s, da);
}

void BertLayer::release() {
  attention_.release();
  mlp_.release();
  x_.reset();
}

}  // namespace memtrain::models
