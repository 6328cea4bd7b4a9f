#pragma once
// Creates and owns the parameters of a model in a fixed order; layers keep handles to the
// tensors (Tensor handles share storage), so the list can grow without invalidating them.
#include <cstdint>
#include <string>
#include <vector>

#include "models/parameter.hpp"
#include "runtime/core/context.hpp"

namespace memtrain::models {

// How init_parameters fills a parameter (Hugging Face BertPreTrainedModel._init_weights).
enum class ParameterInit { normal, zeros, ones };

class ParameterSet {
 public:
  explicit ParameterSet(core::Context& ctx) : ctx_(ctx) {}

  // A new parameter (value tag parameter, zeroed grad tag gradient) appended to the list.
  // Returns a copy of the handles. Throws memtrain::RuntimeError if `name` is taken.
  Parameter add(const std::string& name, std::vector<std::int64_t> shape, ParameterInit init,
                bool weight_decay);

  std::vector<Parameter>& parameters() { return params_; }
  const std::vector<Parameter>& parameters() const { return params_; }
  ParameterInit init_of(std::size_t i) const { return inits_[i]; }

 private:
  core::Context& ctx_;
  std::vector<Parameter> params_;
  std::vector<ParameterInit> inits_;
};

}  // namespace memtrain::models
