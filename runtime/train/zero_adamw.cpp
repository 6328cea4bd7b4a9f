#include "runtime/train/zero_adamw.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/adamw.hpp"
#include "kernels/cpu/half_convert.hpp"
#include "kernels/cpu/parallel.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"
#include "runtime/train/gradient_reads.hpp"
#include "runtime/train/optimizer_registry.hpp"

namespace memtrain::train {
namespace {

// ZeroAdamW stages its state through host memory (its constructor refuses a GPU context), so its
// gradient reads run the op API on the CPU.
const kernels::OpContext kCpu{};

using detail::format_of;
using detail::is_half;
using detail::kChunk;
using detail::read_grad;

}  // namespace

ZeroAdamW::ZeroAdamW(std::vector<models::Parameter>& params, std::vector<comms::GradientBucket>& buckets,
                     comms::GradientSynchronizer& sync, comms::Communicator& dp, core::Context& ctx,
                     AdamWOptions options, comms::Communicator* tp_group)
    : params_(params),
      buckets_(buckets),
      sync_(sync),
      dp_(dp),
      options_(options),
      dry_run_(ctx.dry_run()),
      tp_group_(tp_group),
      value_dtype_(params.empty() ? core::DType::f32 : params.front().value.dtype()) {
  if (ctx.op_context().device != kernels::Device::cpu) {
    throw RuntimeError("ZeroAdamW runs on the CPU only so far (issue 14); the context is " + ctx.device());
  }
  if (sync.reduction() != comms::GradientReduction::reduce_scatter) {
    throw RuntimeError("ZeroAdamW: the gradient synchroniser must reduce-scatter (ZeRO-1)");
  }
  for (const auto& p : params_) {
    if (p.master.defined()) {
      throw RuntimeError("ZeroAdamW: parameter " + p.name +
                         " has a master of its own; ZeRO-1 keeps the masters of its shard "
                         "(ModelOptions::master_weights = false)");
    }
  }
  // Note [ZeRO-1 shards the buckets]; the blocks' state are views of one allocation per kind
  // (Note [One allocation holds every bucket]).
  std::int64_t total = 0;
  for (std::size_t b = 0; b < buckets_.size(); ++b) total += sync.shard_count(b);
  const core::Tensor m_all = core::Tensor::zeros(ctx, {total}, core::DType::f32, core::tags().optimizer_state);
  const core::Tensor v_all = core::Tensor::zeros(ctx, {total}, core::DType::f32, core::tags().optimizer_state);
  core::Tensor master_all;
  if (is_half(value_dtype_)) {
    master_all = core::Tensor::zeros(ctx, {total}, core::DType::f32, core::tags().master_weight);
  }
  auto view = [](const core::Tensor& all, std::int64_t at, std::int64_t n) {
    core::Tensor t = core::Tensor::unbound({n}, core::DType::f32);
    t.bind(all, at);
    return t;
  };
  std::int64_t at = 0;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    Block blk;
    blk.bucket = b;
    blk.begin = sync.shard_begin(b);
    blk.count = sync.shard_count(b);
    const std::int64_t end = blk.begin + blk.count;
    for (const auto& e : buckets_[b].entries) {
      const std::int64_t lo = std::max(blk.begin, e.offset), hi = std::min(end, e.offset + e.numel);
      if (lo < hi) blk.pieces.push_back({e.key, lo - e.offset, lo, lo - blk.begin, hi - lo});
    }
    blk.exp_avg = view(m_all, at, blk.count);
    blk.exp_avg_sq = view(v_all, at, blk.count);
    if (master_all.defined()) blk.master = view(master_all, at, blk.count);
    at += blk.count;
    blocks_.push_back(std::move(blk));
  }
}

std::int64_t ZeroAdamW::shard_elements() const {
  std::int64_t n = 0;
  for (const auto& b : blocks_) n += b.count;
  return n;
}

void ZeroAdamW::init_master(std::size_t param, const float* draw) {
  if (dry_run_ || !is_half(value_dtype_)) return;
  for (auto& b : blocks_) {
    for (const auto& pc : b.pieces) {
      if (pc.param != param) continue;
      std::copy(draw + pc.param_offset, draw + pc.param_offset + pc.length, b.master.data<float>() + pc.state_offset);
    }
  }
}

double ZeroAdamW::grad_norm() const {
  if (dry_run_) return 0.0;
  // [sharded over tp, replicated over tp] squares of this rank's pieces.
  double sums[2] = {0.0, 0.0};
  for (const auto& b : blocks_) {
    const core::Tensor& g = buckets_[b.bucket].buffer;
    for (const auto& pc : b.pieces) {
      sums[params_[pc.param].sharded() ? 0 : 1] += detail::sum_of_squares(kCpu, g, pc.bucket_offset, pc.length);
    }
  }
  dp_.allreduce_sum(sums, 2);
  // Note [The global norm counts every element once]
  if (tp_group_ != nullptr && tp_group_->size() > 1) tp_group_->allreduce_sum(&sums[0], 1);
  return std::sqrt(sums[0] + sums[1]);
}

bool ZeroAdamW::grads_finite() const {
  if (dry_run_) return true;
  for (const auto& b : blocks_) {
    if (!detail::all_finite(kCpu, buckets_[b.bucket].buffer, b.begin, b.count)) return false;
  }
  return true;
}

double ZeroAdamW::clip_grad_norm(double max_norm) {
  const double norm = grad_norm();
  if (dry_run_) return norm;
  const double scale = clip_factor(norm, max_norm);
  if (scale < 1.0) {
    for (auto& b : blocks_) {
      core::Tensor& g = buckets_[b.bucket].buffer;
      if (is_half(g.dtype())) {
        throw RuntimeError("ZeroAdamW::clip_grad_norm: 16-bit gradients are clipped through step's grad_multiplier");
      }
      kernels::scale_inplace(g.data<float>() + b.begin, b.count, static_cast<float>(scale));
    }
  }
  return norm;
}

void ZeroAdamW::update(Block& b, double lr, float multiplier) {
  core::Tensor& g = buckets_[b.bucket].buffer;
  const auto b1 = static_cast<float>(options_.beta1);
  const auto b2 = static_cast<float>(options_.beta2);
  const auto eps = static_cast<float>(options_.eps);
  const auto flr = static_cast<float>(lr);
  const std::int64_t t = step_;
  float* m = b.exp_avg.data<float>();
  float* v = b.exp_avg_sq.data<float>();
  for (const auto& pc : b.pieces) {
    auto& p = params_[pc.param];
    const auto wd = static_cast<float>(p.weight_decay ? options_.weight_decay : 0.0);
    if (!is_half(value_dtype_)) {
      // fp32: the values are their own masters, updated in place as AdamW does.
      float* grad = g.data<float>() + pc.bucket_offset;
      kernels::adamw_update(p.value.data<float>() + pc.param_offset, grad, m + pc.state_offset, v + pc.state_offset,
                            pc.length, flr, b1, b2, eps, wd, t, multiplier);
      continue;
    }
    float* master = b.master.data<float>() + pc.state_offset;
    std::uint16_t* value = p.value.data<std::uint16_t>() + pc.param_offset;
    const kernels::HalfFormat format = format_of(value_dtype_);
    float* mp = m + pc.state_offset;
    float* vp = v + pc.state_offset;
    if (g.dtype() == value_dtype_) {
      // A 16-bit bucket of the values' format: one pass converting as it goes, bitwise the
      // chunked path below (as AdamW::step).
      kernels::adamw_update_half(master, value, g.data<std::uint16_t>() + pc.bucket_offset, mp, vp, pc.length, flr, b1,
                                 b2, eps, wd, t, multiplier, format);
      continue;
    }
    const std::int64_t chunks = (pc.length + kChunk - 1) / kChunk;
    const Piece piece = pc;
    kernels::detail::parallel_for(chunks, chunks > 8, [&, master, value, mp, vp, piece](std::int64_t c) {
      const std::int64_t lo = c * kChunk, n = std::min(kChunk, piece.length - lo);
      float grad[kChunk];
      read_grad(grad, g, piece.bucket_offset + lo, n, 1.0f);  // the multiplier is applied as AdamW reads it
      kernels::adamw_update(master + lo, grad, mp + lo, vp + lo, n, flr, b1, b2, eps, wd, t, multiplier);
      kernels::convert_float_to_half(value + lo, master + lo, n, format);
    });
  }
}

// This rank's new values into its block of the bucket (value-typed elements at the gradients'
// offsets), once the block's gradients have all been read.
void ZeroAdamW::pack(Block& b) {
  core::Tensor& buf = buckets_[b.bucket].buffer;
  for (const auto& pc : b.pieces) {
    const auto& p = params_[pc.param];
    if (is_half(value_dtype_)) {
      auto* words =
          is_half(buf.dtype()) ? buf.data<std::uint16_t>() : reinterpret_cast<std::uint16_t*>(buf.data<float>());
      std::memcpy(words + pc.bucket_offset, p.value.data<std::uint16_t>() + pc.param_offset,
                  sizeof(std::uint16_t) * pc.length);
    } else {
      std::memcpy(buf.data<float>() + pc.bucket_offset, p.value.data<float>() + pc.param_offset,
                  sizeof(float) * pc.length);
    }
  }
}

// Every parameter's value from the gathered buckets.
void ZeroAdamW::unpack() {
  for (auto& bucket : buckets_) {
    core::Tensor& buf = bucket.buffer;
    for (const auto& e : bucket.entries) {
      auto& p = params_[e.key];
      if (is_half(value_dtype_)) {
        const auto* words = is_half(buf.dtype()) ? buf.data<std::uint16_t>()
                                                 : reinterpret_cast<const std::uint16_t*>(buf.data<float>());
        std::memcpy(p.value.data<std::uint16_t>(), words + e.offset, sizeof(std::uint16_t) * e.numel);
      } else {
        std::memcpy(p.value.data<float>(), buf.data<float>() + e.offset, sizeof(float) * e.numel);
      }
    }
  }
}

void ZeroAdamW::step(double lr, double grad_multiplier) {
  ++step_;
  if (dry_run_) return;
  const auto multiplier = static_cast<float>(grad_multiplier);
  for (auto& b : blocks_) update(b, lr, multiplier);
  for (auto& b : blocks_) pack(b);
  sync_.all_gather_shards(value_dtype_);
  unpack();
}

bool ZeroAdamW::has_masters() const { return is_half(value_dtype_); }

std::vector<ZeroAdamW::StatePiece> ZeroAdamW::state_pieces() const {
  std::vector<StatePiece> out;
  for (const auto& b : blocks_) {
    core::Tensor m = b.exp_avg, v = b.exp_avg_sq, master = b.master;  // handles onto the same storage
    for (const auto& pc : b.pieces) {
      if (pc.length == 0) continue;
      out.push_back({pc.param, pc.param_offset, pc.length, m.data<float>() + pc.state_offset,
                     v.data<float>() + pc.state_offset,
                     master.defined() ? master.data<float>() + pc.state_offset : nullptr});
    }
  }
  return out;
}

OptimizerState ZeroAdamW::state() const {
  OptimizerState s;
  s.sharded = true;
  s.masters = has_masters();
  s.shard_elements = shard_elements();
  if (!dry_run_) s.pieces = state_pieces();
  return s;
}

std::unique_ptr<Optimizer> make_adamw(const Config& config, const OptimizerInputs& in) {
  const auto& tc = config.training;
  const AdamWOptions options{tc.adam_beta1, tc.adam_beta2, tc.adam_eps, tc.weight_decay};
  if (config.parallel.zero_stage == 1) {
    return std::make_unique<ZeroAdamW>(in.model.parameters(), in.model.gradient_buckets(), in.sync, in.dp, in.ctx,
                                       options, in.tp_group);
  }
  return std::make_unique<AdamW>(in.model.parameters(), in.ctx, options, in.tp_group);
}

}  // namespace memtrain::train
