#pragma once
// A trainable tensor, its gradient, and whether AdamW decays it.
#include <string>

#include "runtime/core/tensor.hpp"

namespace memtrain::models {

struct Parameter {
  std::string name;    // Hugging Face name, e.g. bert.encoder.layer.0.attention.self.query.weight
  core::Tensor value;  // tag parameter
  core::Tensor grad;   // same shape, tag gradient; forward_backward accumulates into it
  bool weight_decay;   // false for biases and LayerNorm weights (as Hugging Face and Megatron)
};

}  // namespace memtrain::models
