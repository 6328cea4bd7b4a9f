#include "models/linear.hpp"

#include "kernels/cpu/linear.hpp"
#include "models/f32_access.hpp"

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
  const auto w = read_f32(s.ctx, weight_.value);                             // [out, in]
  const auto b = read_f32(s.ctx, with_bias ? bias_.value : core::Tensor());  // [out]
  kernels::linear_forward(out, inp, w.get(), b.get(), N, in_, out_);
}

void Linear::backward(const PassState& s, float* dinp, const float* dout, const float* inp, int N,
                      bool with_bias) {
  if (!s.compute()) return;
  const auto w = read_f32(s.ctx, weight_.value);                         // [out, in]
  auto dw = update_f32(s.ctx, weight_.grad);                             // [out, in]
  auto db = update_f32(s.ctx, with_bias ? bias_.grad : core::Tensor());  // [out]
  kernels::linear_backward(dinp, dw.get(), db.get(), dout, inp, w.get(), N, in_, out_);
}

}  // namespace memtrain::models
