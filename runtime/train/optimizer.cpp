#include "runtime/train/optimizer.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/adamw.hpp"
#include "kernels/cpu/half_convert.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/ops/optimizer.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"
#include "runtime/train/gradient_reads.hpp"

namespace memtrain::train {
namespace {

using detail::format_of;
using detail::is_half;
using detail::kChunk;
using detail::read_grad;

// body(lo, hi) for the chunks of [0, n), on the kernels' thread team when there are several.
template <class Body>
void for_chunks(std::int64_t n, Body&& body) {
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  kernels::detail::parallel_for(chunks, chunks > 8,
                                [&](std::int64_t c) { body(c * kChunk, std::min(n, (c + 1) * kChunk)); });
}

}  // namespace

double clip_factor(double norm, double max_norm) {
  return max_norm > 0.0 ? std::min(1.0, max_norm / (norm + 1e-6)) : 1.0;
}

AdamW::AdamW(std::vector<models::Parameter>& params, core::Context& ctx, AdamWOptions options,
             comms::Communicator* tp_group)
    : params_(params), options_(options), dry_run_(ctx.dry_run()), kc_(ctx.op_context()), tp_group_(tp_group) {
  for (const auto& p : params) {
    if (is_half(p.value.dtype()) && !p.master.defined()) {
      throw RuntimeError("AdamW: 16-bit parameter " + p.name +
                         " has no f32 master (ModelOptions::master_weights is false: ZeRO-1's "
                         "ZeroAdamW keeps the masters)");
    }
    if (is_half(p.value.dtype()) && p.grad.dtype() != p.value.dtype() && kc_.device != kernels::Device::cpu) {
      throw RuntimeError("AdamW: parameter " + p.name + " is " + p.value.describe() + " with a " + p.grad.describe() +
                         " gradient; mixed storage is staged through host "
                         "memory and runs on the CPU only, not on " +
                         ctx.device());
    }
  }
  m_.reserve(params.size());
  v_.reserve(params.size());
  for (const auto& p : params) {
    m_.push_back(core::Tensor::zeros(ctx, p.value.shape(), core::DType::f32, core::tags().optimizer_state));
    v_.push_back(core::Tensor::zeros(ctx, p.value.shape(), core::DType::f32, core::tags().optimizer_state));
  }
}

double AdamW::grad_norm() const {
  if (dry_run_) return 0.0;
  if (tp_group_ == nullptr || tp_group_->size() <= 1) return std::sqrt(detail::grads_sum_of_squares(kc_, params_));
  // Note [The global norm counts every element once]
  // Under tensor parallelism a sharded parameter's elements are spread over the group, a
  // replicated one's are on every rank (bitwise equal: Note [Collectives leave every rank with
  // the same bits]). Summing every rank's squares would count replicated ones tp times, as
  // Megatron-LM avoids by summing only non-duplicate parameters before the all-reduce. So the
  // shards' squares are summed over the group and the replicated squares added once. The data-
  // parallel sum happened before: every dp rank holds the same gradients.
  double sharded = 0.0, replicated = 0.0;
  for (const auto& p : params_)
    (p.sharded() ? sharded : replicated) += detail::sum_of_squares(kc_, p.grad, 0, p.grad.numel());
  tp_group_->allreduce_sum(&sharded, 1);
  return std::sqrt(sharded + replicated);
}

bool AdamW::grads_finite() const { return dry_run_ || detail::grads_all_finite(kc_, params_); }

double AdamW::clip_grad_norm(double max_norm) {
  const double norm = grad_norm();
  if (dry_run_) return norm;
  const double scale = clip_factor(norm, max_norm);
  if (scale < 1.0) {
    for (auto& p : params_) {
      if (is_half(p.grad.dtype())) {
        throw RuntimeError("AdamW::clip_grad_norm: gradient of " + p.name + " is " + p.grad.describe() +
                           "; 16-bit gradients are clipped through AdamW::step's grad_multiplier");
      }
      kernels::ops::scale_inplace(kc_, p.grad.data<float>(), p.grad.numel(), static_cast<float>(scale));
    }
  }
  return norm;
}

void AdamW::step(double lr, double grad_multiplier) {
  ++step_;
  if (dry_run_) return;
  const float multiplier = static_cast<float>(grad_multiplier);
  const auto b1 = static_cast<float>(options_.beta1);
  const auto b2 = static_cast<float>(options_.beta2);
  const auto eps = static_cast<float>(options_.eps);
  const auto flr = static_cast<float>(lr);
  const std::int64_t t = step_;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    auto& p = params_[i];
    const auto wd = static_cast<float>(p.weight_decay ? options_.weight_decay : 0.0);
    float* m = m_[i].data<float>();
    float* v = v_[i].data<float>();
    if (!p.master.defined()) {
      // fp32: the weights are their own master.
      kernels::ops::adamw_update(kc_, p.value.data<float>(), p.grad.data<float>(), m, v, p.value.numel(), flr, b1, b2,
                                 eps, wd, t, multiplier);
      continue;
    }
    float* master = p.master.data<float>();
    std::uint16_t* value = p.value.data<std::uint16_t>();
    if (p.grad.dtype() == p.value.dtype()) {
      // One pass converting as it goes (bf16's conversions are bit operations that vectorize;
      // f16's go a block at a time through L1); bitwise the chunked path below.
      kernels::ops::adamw_update_half(kc_, master, value, p.grad.data<std::uint16_t>(), m, v, p.value.numel(), flr, b1,
                                      b2, eps, wd, t, multiplier, format_of(p.value.dtype()));
      continue;
    }
    // Note [Master updates in stack-sized chunks]
    const kernels::HalfFormat format = format_of(p.value.dtype());
    const core::Tensor& grad = p.grad;
    for_chunks(p.value.numel(), [&, master, value, m, v](std::int64_t lo, std::int64_t hi) {
      float g[kChunk];
      read_grad(g, grad, lo, hi - lo, 1.0f);  // the multiplier is applied as AdamW reads g
      kernels::adamw_update(master + lo, g, m + lo, v + lo, hi - lo, flr, b1, b2, eps, wd, t, multiplier);
      kernels::convert_float_to_half(value + lo, master + lo, hi - lo, format);
    });
  }
}

OptimizerState AdamW::state() const {
  OptimizerState s;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    s.replicated.push_back({i, "exp_avg", m_[i]});
    s.replicated.push_back({i, "exp_avg_sq", v_[i]});
    if (params_[i].master.defined()) s.replicated.push_back({i, "master", params_[i].master});
  }
  return s;
}

}  // namespace memtrain::train
