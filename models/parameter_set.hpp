#pragma once
// Creates and owns the parameters of a model in a fixed order; layers keep handles to the
// tensors (Tensor handles share storage), so the list can grow without invalidating them.
#include <cstdint>
#include <string>
#include <vector>

#include "models/model_options.hpp"
#include "models/parameter.hpp"
#include "runtime/core/context.hpp"

namespace memtrain::models {

// How init_parameters fills a parameter (Hugging Face BertPreTrainedModel._init_weights).
enum class ParameterInit { normal, zeros, ones };

class ParameterSet {
 public:
  // options.compute_dtype and options.fp32_grad_accumulation decide the storage of each
  // parameter (see add); the other options do not matter here.
  explicit ParameterSet(core::Context& ctx, const ModelOptions& options = {})
      : ctx_(ctx), options_(options) {}

  // A new parameter appended to the list: value in the compute dtype (tag parameter), a zeroed
  // grad (tag gradient) in the compute dtype or f32 with fp32_grad_accumulation, and when the
  // value is 16-bit an f32 master (tag master_weight). Bytes per element: f32 4 + 4;
  // f16/bf16 2 + 2 (or 4) + 4. Returns a copy of the handles. Throws memtrain::RuntimeError if
  // `name` is taken.
  // `shape` is this rank's shard; `shard` says where it sits in the unsharded tensor
  // (replicated by default).
  Parameter add(const std::string& name, std::vector<std::int64_t> shape, ParameterInit init,
                bool weight_decay, ShardSpec shard = {});

  std::vector<Parameter>& parameters() { return params_; }
  const std::vector<Parameter>& parameters() const { return params_; }
  ParameterInit init_of(std::size_t i) const { return inits_[i]; }

 private:
  core::Context& ctx_;
  ModelOptions options_;
  std::vector<Parameter> params_;
  std::vector<ParameterInit> inits_;
};

}  // namespace memtrain::models
