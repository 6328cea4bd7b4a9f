#include "models/linear.hpp"
#include "models/op_descriptions.hpp"

#include "kernels/cpu/linear.hpp"
#include "models/f32_access.hpp"

namespace memtrain::models {

namespace {

int shard_size(int n, LinearParallel parallel, LinearParallel split, const TensorParallel& tp) {
  return parallel == split ? n / tp.size() : n;
}

}  // namespace

Linear::Linear(ParameterSet& params, const std::string& name, int in_features, int out_features,
               LinearParallel parallel, const TensorParallel& tp)
    : in_(shard_size(in_features, parallel, LinearParallel::row, tp)),
      out_(shard_size(out_features, parallel, LinearParallel::column, tp)) {
  ShardSpec w, b;
  if (!tp.enabled()) {
    // A group of one: the whole tensor, replicated (nothing to shard).
  } else if (parallel == LinearParallel::column) {
    w = ShardSpec{Sharding::dim0, std::int64_t{tp.rank()} * out_, out_features, out_features};
    b = w;
  } else if (parallel == LinearParallel::row) {
    w = ShardSpec{Sharding::dim1, std::int64_t{tp.rank()} * in_, in_features, in_features};
  }
  weight_ = params.add(name + ".weight", {out_, in_}, ParameterInit::normal,
                       /*weight_decay=*/true, w);
  bias_ = params.add(name + ".bias", {out_}, ParameterInit::zeros, /*weight_decay=*/false, b);
}

void Linear::forward(const PassState& s, float* out, const float* inp, int N,
                     bool with_bias) const {
  if (!s.compute()) return;
  const auto w = read_f32(s.ctx, weight_.value);                             // [out, in]
  const auto b = read_f32(s.ctx, with_bias ? bias_.value : core::Tensor());  // [out]
  const core::ScopedOp op(s.ctx.op_profile(), "gemm.forward", [&] { return gemm_description(N, in_, out_, 1); });
  kernels::linear_forward(out, inp, w.get(), b.get(), N, in_, out_);
}

void Linear::backward(const PassState& s, float* dinp, const float* dout, const float* inp, int N,
                      bool with_bias) {
  if (!s.compute()) return;
  const auto w = read_f32(s.ctx, weight_.value);                         // [out, in]
  auto dw = gradient_f32(s.ctx, weight_.grad, s.grads_zero);                             // [out, in]
  auto db = gradient_f32(s.ctx, with_bias ? bias_.grad : core::Tensor(), s.grads_zero);  // [out]
  const core::ScopedOp op(s.ctx.op_profile(), "gemm.backward",
                          [&] { return gemm_description(N, in_, out_, dinp ? 2 : 1); });
  kernels::linear_backward(dinp, dw.get(), db.get(), dout, inp, w.get(), N, in_, out_);
}

void add_bias(const PassState& s, float* out, const Parameter& bias, int N) {
  if (!s.compute()) return;
  const auto b = read_f32(s.ctx, bias.value);  // [C]
  const std::int64_t C = bias.value.numel();
  const float* bp = b.get();
  for (std::int64_t i = 0; i < N; ++i) {
    float* row = out + i * C;
    for (std::int64_t c = 0; c < C; ++c) row[c] += bp[c];
  }
}

}  // namespace memtrain::models
