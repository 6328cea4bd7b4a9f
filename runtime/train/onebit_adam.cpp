#include "runtime/train/onebit_adam.hpp"

#include <cmath>
#include <string>

#include "kernels/cpu/adamw.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"
#include "runtime/train/gradient_reads.hpp"
#include "runtime/train/norm_sketch.hpp"
#include "runtime/train/optimizer_registry.hpp"
#include "runtime/config/onebit_settings.hpp"

namespace memtrain::train {
namespace {

// OneBitAdam stages its state through host memory (its constructor refuses a GPU context), so
// its gradient reads run the op API on the CPU.
const kernels::OpContext kCpu{};

}  // namespace

OneBitAdam::OneBitAdam(std::vector<models::Parameter>& params, const std::vector<comms::GradientBucket>& buckets,
                       comms::GradientSynchronizer& sync, comms::Communicator& dp, core::Context& ctx,
                       AdamWOptions options, OneBitAdamOptions onebit)
    : params_(params),
      buckets_(buckets),
      dp_(dp),
      options_(options),
      onebit_(onebit),
      dry_run_(ctx.dry_run()),
      m_(params.size()) {
  if (ctx.op_context().device != kernels::Device::cpu) {
    throw RuntimeError("OneBitAdam runs on the CPU only so far (issue 14); the context is " + ctx.device());
  }
  if (onebit_.freeze_step < 1) {
    throw RuntimeError("OneBitAdam: freeze_step = " + std::to_string(onebit_.freeze_step) +
                       "; expected >= 1 (the frozen variance comes from Adam's own steps)");
  }
  for (const auto& p : params) {
    if (p.value.dtype() != core::DType::f32 || p.grad.dtype() != core::DType::f32) {
      throw RuntimeError("OneBitAdam: parameter " + p.name + " is " + p.value.describe() + " with a " +
                         core::dtype_name(p.grad.dtype()) +
                         " gradient; 1-bit Adam takes f32 parameters and gradients only");
    }
  }
  const auto state = core::tags().optimizer_state;
  for (const auto& b : buckets) {
    m_buffers_.push_back(core::Tensor::zeros(ctx, {b.buffer.numel()}, core::DType::f32, state));
    for (const auto& e : b.entries) {
      m_.at(e.key) = core::Tensor::unbound(params[e.key].value.shape(), core::DType::f32);
      m_[e.key].bind(m_buffers_.back(), e.offset);
    }
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (!m_[i].defined()) {
      throw RuntimeError("OneBitAdam: parameter " + params[i].name + " is in no gradient bucket");
    }
    v_.push_back(core::Tensor::zeros(ctx, params[i].value.shape(), core::DType::f32, state));
  }
  if (dp.size() > 1)
    compressor_ = std::make_unique<comms::OneBitCompressor>(buckets, dp.size(), ctx, onebit_.compression);
  sync.keep_local_from(onebit_.freeze_step);
}

double OneBitAdam::grad_norm() const {
  if (dry_run_) return 0.0;
  if (!frozen() || dp_.size() <= 1) return std::sqrt(detail::grads_sum_of_squares(kCpu, params_));
  // Note [1-bit Adam clips by a sketch of the summed norm]; the sketch of a non-finite gradient
  // is non-finite on every rank after the sum (Note [The norm pass is the overflow check]).
  NormSketch sketch(onebit_.seed, static_cast<std::uint64_t>(step_));
  for (std::size_t i = 0; i < params_.size(); ++i) {
    sketch.add(static_cast<std::uint32_t>(i), params_[i].grad.data<float>(), params_[i].grad.numel());
  }
  dp_.allreduce_sum(sketch.buckets(), NormSketch::kBuckets);
  norm_comm_ = {};
  norm_comm_.bytes = norm_comm_.uncompressed_bytes = NormSketch::kBuckets * 8;
  norm_comm_.calls = 1;
  return sketch.norm();
}

bool OneBitAdam::grads_finite() const { return dry_run_ || detail::grads_all_finite(kCpu, params_); }

double OneBitAdam::clip_grad_norm(double max_norm) {
  const double norm = grad_norm();
  if (dry_run_) return norm;
  const double scale = clip_factor(norm, max_norm);
  if (scale < 1.0) {
    for (auto& p : params_) kernels::scale_inplace(p.grad.data<float>(), p.grad.numel(), static_cast<float>(scale));
  }
  return norm;
}

void OneBitAdam::step(double lr, double grad_multiplier) {
  comm_ = norm_comm_;  // the sketch's sum, when grad_norm sent one for this step
  norm_comm_ = {};
  const bool compressed = frozen();
  ++step_;
  if (dry_run_) return;
  const auto b1 = static_cast<float>(options_.beta1);
  const auto b2 = static_cast<float>(options_.beta2);
  const auto eps = static_cast<float>(options_.eps);
  const auto flr = static_cast<float>(lr);
  const auto multiplier = static_cast<float>(grad_multiplier);
  if (!compressed) {
    // torch.optim.AdamW on the summed gradients, as AdamW::step's fp32 path.
    for (std::size_t i = 0; i < params_.size(); ++i) {
      auto& p = params_[i];
      const auto wd = static_cast<float>(p.weight_decay ? options_.weight_decay : 0.0);
      if (multiplier != 1.0f) kernels::scale_inplace(p.grad.data<float>(), p.grad.numel(), multiplier);
      kernels::adamw_update(p.value.data<float>(), p.grad.data<float>(), m_[i].data<float>(), v_[i].data<float>(),
                            p.value.numel(), flr, b1, b2, eps, wd, step_);
    }
    return;
  }
  // Note [1-bit Adam sums the momentum]: which parameters have a gradient on some rank.
  std::vector<std::int64_t> nonzero(params_.size(), 0);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const float* g = params_[i].grad.data<float>();
    for (std::int64_t j = 0; j < params_[i].grad.numel() && nonzero[i] == 0; ++j) nonzero[i] = g[j] != 0.0f;
  }
  const int N = dp_.size();
  if (N > 1) {
    dp_.allreduce_sum(nonzero.data(), static_cast<std::int64_t>(nonzero.size()));
    comm_.bytes += static_cast<std::int64_t>(nonzero.size()) * 8;
    comm_.uncompressed_bytes += static_cast<std::int64_t>(nonzero.size()) * 8;
    ++comm_.calls;
  }
  const float share = b1 / static_cast<float>(N);
  const float one_minus_b1 = 1.0f - b1;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const auto& entries = buckets_[b].entries;
    std::vector<bool> skip(entries.size());
    for (std::size_t t = 0; t < entries.size(); ++t) {
      const std::size_t i = entries[t].key;
      skip[t] = nonzero[i] == 0;
      if (skip[t]) continue;
      float* m = m_[i].data<float>();
      const float* g = params_[i].grad.data<float>();
      for (std::int64_t j = 0; j < params_[i].grad.numel(); ++j) {
        m[j] = share * m[j] + one_minus_b1 * (multiplier * g[j]);
      }
    }
    if (compressor_) {
      comm_.uncompressed_bytes += buckets_[b].buffer.numel() * 4;
      compressor_->sum_entries(b, m_buffers_[b].data<float>(), dp_, comm_, &skip);
    }
  }
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (nonzero[i] == 0) continue;
    auto& p = params_[i];
    const auto wd = static_cast<float>(p.weight_decay ? options_.weight_decay : 0.0);
    kernels::adam_frozen_variance_update(p.value.data<float>(), m_[i].data<float>(), v_[i].data<float>(),
                                         p.value.numel(), flr, b1, b2, eps, wd, step_, onebit_.freeze_step);
  }
}

OptimizerState OneBitAdam::state() const {
  OptimizerState s;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    s.replicated.push_back({i, "exp_avg", m_[i]});
    s.replicated.push_back({i, "exp_avg_sq", v_[i]});
  }
  if (compressor_) s.compressors.emplace_back("onebit_adam", compressor_.get());
  return s;
}

std::unique_ptr<Optimizer> make_onebit_adam(const Config& config, const OptimizerInputs& in) {
  const auto& tc = config.training;
  const AdamWOptions options{tc.adam_beta1, tc.adam_beta2, tc.adam_eps, tc.weight_decay};
  return std::make_unique<OneBitAdam>(
      in.model.parameters(), in.model.gradient_buckets(), in.sync, in.dp, in.ctx, options,
      OneBitAdamOptions{config.compression.freeze_step, onebit_options(config), config.training.seed});
}

}  // namespace memtrain::train
