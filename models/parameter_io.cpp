#include "models/parameter_io.hpp"

#include <algorithm>
#include <set>

#include "models/f32_access.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::models {

namespace {

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

std::map<std::string, core::HostArray> parameters_to_arrays(const std::vector<Parameter>& params) {
  std::map<std::string, core::HostArray> out;
  for (const auto& p : params) {
    // The f32 master is the parameter when there is one (the 16-bit value is its rounding).
    const core::Tensor& t = p.master.defined() ? p.master : p.value;
    if (t.dtype() == core::DType::f32 && t.device() == kernels::Device::cpu) {
      out.emplace(p.name, core::host_array_f32(t.data<float>(), t.shape()));
    } else {
      std::vector<float> f(static_cast<std::size_t>(t.numel()));
      load_f32(f.data(), t);
      out.emplace(p.name, core::host_array_f32(f.data(), t.shape()));
    }
  }
  return out;
}

void load_parameters(std::vector<Parameter>& params, const std::map<std::string, core::HostArray>& arrays,
                     const std::string& source) {
  auto fail = [&](const std::string& what) { throw RuntimeError("loading parameters from " + source + ": " + what); };
  std::set<std::string> names;
  for (const auto& p : params) {
    names.insert(p.name);
    auto it = arrays.find(p.name);
    if (it == arrays.end()) fail("no tensor named " + p.name);
    const auto& a = it->second;
    if (a.shape != p.value.shape()) {
      fail(p.name + " has shape " + shape_string(a.shape) + "; the model expects " + shape_string(p.value.shape()));
    }
    if (a.dtype != "F32" && a.dtype != "F64") {
      fail(p.name + " has dtype " + a.dtype + "; expected F32 (or F64)");
    }
  }
  for (const auto& [name, a] : arrays) {
    if (!names.count(name)) fail("tensor " + name + " matches no parameter of this model");
  }
  for (auto& p : params) {
    const auto values = core::to_floats(arrays.at(p.name));
    const auto n = static_cast<std::int64_t>(values.size());
    if (p.master.defined()) store_f32(p.master, values.data(), n);
    store_f32(p.value, values.data(), n);  // rounds to nearest even when 16-bit
  }
}

}  // namespace memtrain::models
