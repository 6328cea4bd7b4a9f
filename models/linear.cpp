#include "models/linear.hpp"

#include "kernels/cpu/linear.hpp"

namespace memtrain::models {

Linear::Linear(ParameterSet& params, const std::string& name, int in_features, int out_features)
    : weight_(params.add(name + ".weight", {out_features, in_features}, ParameterInit::normal,
                         /*weight_decay=*/true)),
      bias_(params.add(name + ".bias", {out_features}, ParameterInit::zeros,
                       /*weight_decay=*/false)),
      in_(in_features),
      out_(out_features) {}

void Linear::forward(const PassState& s, float* out, const float* inp, int N,
                     bool with_bias) const {
  if (!s.compute()) return;
  kernels::linear_forward(out, inp, weight_.value.data<float>(),
                          with_bias ? bias_.value.data<float>() : nullptr, N, in_, out_);
}

void Linear::backward(const PassState& s, float* dinp, const float* dout, const float* inp, int N,
                      bool with_bias) {
  if (!s.compute()) return;
  kernels::linear_backward(dinp, weight_.grad.data<float>(),
                           with_bias ? bias_.grad.data<float>() : nullptr, dout, inp,
                           weight_.value.data<float>(), N, in_, out_);
}

}  // namespace memtrain::models
