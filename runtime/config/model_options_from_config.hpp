#pragma once
// The model-side view of a Config: precision.* and memory.recompute*/attention as the
// models::ModelOptions the model is built with.
#include "models/model_options.hpp"
#include "models/tensor_parallel.hpp"
#include "runtime/config/config.hpp"

namespace memtrain::train {

// precision.dtype fp32|fp16|bf16 -> compute_dtype f32|f16|bf16; fp32_grad_accumulation as is
// (it only changes anything in 16-bit modes); memory.recompute none|selective|full,
// recompute_method, recompute_num_layers and attention map one to one.
// memory.recompute = auto must be resolved first (recompute_auto.hpp replaces it with the
// chosen granularity): throws memtrain::ConfigError for "auto", and for any value the loader
// would not have accepted (a Config built by hand).
models::ModelOptions model_options(const Config& config);

// parallel.make_vocab_size_divisible_by and sequence_parallel over `tp_group` (the
// tensor-parallel group of a ProcessGrid built with parallel.tensor_model_parallel_size; null
// for none).
models::TensorParallel tensor_parallel(const Config& config, comms::Communicator* tp_group);

// The compute dtype of precision.dtype ("fp32" -> f32, "fp16" -> f16, "bf16" -> bf16).
// Throws memtrain::ConfigError for any other text.
core::DType compute_dtype(const std::string& precision_dtype);

}  // namespace memtrain::train
