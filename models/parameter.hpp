#pragma once
// A trainable tensor, its gradient, and whether AdamW decays it.
#include <string>

#include "runtime/core/tensor.hpp"

namespace memtrain::models {

struct Parameter {
  std::string name;    // Hugging Face name, e.g. bert.encoder.layer.0.attention.self.query.weight
  core::Tensor value;   // compute dtype (ModelOptions::compute_dtype), tag parameter
  core::Tensor grad;    // same shape, tag gradient; forward_backward accumulates into it.
                        // compute dtype, or f32 with ModelOptions::fp32_grad_accumulation
  bool weight_decay;   // false for biases and LayerNorm weights (as Hugging Face and Megatron)
  core::Tensor master;  // f32, tag master_weight; defined only when value is 16-bit: the
                        // optimizer updates it and writes value back (round to nearest even)
};

}  // namespace memtrain::models
