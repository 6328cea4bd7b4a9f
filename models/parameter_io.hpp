#pragma once
// Parameters to and from named host arrays (the safetensors layout of checkpoints and of the
// PyTorch fixtures), matched by Hugging Face name.
#include <map>
#include <string>
#include <vector>

#include "models/parameter.hpp"
#include "runtime/core/safetensors.hpp"

namespace memtrain::models {

// One F32 array per parameter, keyed by name: the f32 master when the parameter has one (16-bit
// modes), else the value (grads are not included).
std::map<std::string, core::HostArray> parameters_to_arrays(const std::vector<Parameter>& params);

// Copies arrays[p.name] into every p.master (when defined) and p.value (rounded to nearest even
// when 16-bit). `source` names where the arrays came from (a file
// path) for messages. Throws memtrain::RuntimeError naming the source and the parameter when
// an array is missing, has another shape, or is not F32/F64; arrays that match no parameter
// are an error too (a checkpoint of another model). Nothing is copied unless all match.
void load_parameters(std::vector<Parameter>& params, const std::map<std::string, core::HostArray>& arrays,
                     const std::string& source);

}  // namespace memtrain::models
