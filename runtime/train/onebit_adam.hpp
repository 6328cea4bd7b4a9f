#pragma once
// 1-bit Adam (Tang et al., "1-bit Adam: Communication Efficient Large-Scale Training with Adam's
// Convergence Speed", ICML 2021, Algorithm 1), with DeepSpeed's OnebitAdam as the reference
// behaviour: Adam with full-precision gradient sums for a warm-up of freeze_step steps, then
// the variance frozen and the momentum summed through the 1-bit compressed all-reduce.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "comms/communicator.hpp"
#include "comms/gradient_bucket.hpp"
#include "comms/gradient_sync_stats.hpp"
#include "comms/gradient_synchronizer.hpp"
#include "comms/onebit_compressor.hpp"
#include "models/parameter.hpp"
#include "runtime/core/context.hpp"
#include "runtime/core/tensor.hpp"
#include "runtime/train/optimizer.hpp"

namespace memtrain::train {

// Note [1-bit Adam sums the momentum]
// Adam's variance settles early in training, and then its momentum is what carries the
// gradients: Tang et al. freeze v after a warm-up and from then on communicate only m, which
// error-compensated 1-bit compression (comms/onebit_compressor.hpp) can carry. Up to
// freeze_step the synchroniser sums the gradients and this is torch.optim.AdamW, bit for bit.
// From freeze_step on, the synchroniser keeps each rank's own gradient g_i (keep_local_from)
// and rank i forms its share of the momentum,
//     m_i = beta1 m / N + (1 - beta1) g_i,
// so that sum_i m_i = beta1 m + (1 - beta1) sum_i g_i is the momentum of the summed gradient
// (memtrain sums rather than averages: each g_i is already scaled by one over the global
// masked-token count); the compressed sum of the m_i is the new m on every rank, and
//     p <- p (1 - lr wd) - lr (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t_freeze)) + eps)
// with v as it was at the freeze. A parameter whose gradient is exactly zero on every rank (one
// all-reduce of a flag per parameter) keeps its momentum and value: it took no part in the step,
// as a parameter without a .grad in PyTorch; so does an element whose variance is 0 at the freeze
// (it never had a gradient: DeepSpeed's exp_avg_mask, found rather than given).
//
// Note [1-bit Adam clips by a sketch of the summed norm]
// Clipping needs the norm of the summed gradient G = sum_i g_i, which no rank holds after the
// freeze. Without clipping a frozen variance cannot damp a gradient that grows, and the main job
// diverged within 20 steps of the freeze. The bound N max_i ||g_i|| >= ||G|| (the triangle
// inequality, one all-reduce of a double) was used first; but where the ranks' gradients are
// mostly independent noise ||G|| is nearer sqrt(N) ||g_i||, and a job that clips every step (the
// main job's norm stays above grad_clip 1.0) then steps sqrt(N) times too short for the rest of
// the run: 4.847 against 4.662 uncompressed at 2 ranks (+4.0 %), where the same frozen
// variance on one rank, with the exact norm, ended at 4.535. An unbiased estimate of ||G|| costs
// one all-reduce of 512 doubles: the sum of the ranks' sketches (Note [A sketch of the norm of
// a sum], norm_sketch.hpp), within about 3 % of ||G||, from a pass over the gradients that
// replaces the local norm's. grad_norm reports the estimate after the freeze (the exact norm
// before it, and with one rank).

// Note [1-bit Adam's frozen variance needs a long average]
// The frozen v stands in for every later step's squared gradient. With adam_beta2 0.98
// (configs/main.yaml, RoBERTa's value) v is an average over about the last 50 steps; an element
// whose gradient was quiet in those steps freezes a small v, and when its gradient returns the
// step m / sqrt(v) is many times Adam's: the main job's loss spiked from 5.9 to 8-9 within 50
// steps of a freeze at step 300 on one rank, and ended 5.651 against 4.840 (+17 %). With BERT's
// 0.999 (Tang et al.'s and DeepSpeed's setting) v averages the whole warm-up, and the same freeze
// on one rank ended at 4.535 against AdamW's 4.662 at 2 ranks. So 1-bit Adam wants
// adam_beta2 0.999 and a freeze after the learning-rate warm-up; docs/config.md says so.

// Settings of 1-bit Adam beyond AdamW's.
struct OneBitAdamOptions {
  std::int64_t freeze_step = 400;    // optimizer steps of plain Adam before the variance freezes
  comms::OneBitOptions compression;  // how the momentum is compressed
  std::uint64_t seed = 0;            // the norm sketch's signs (the same on every rank)
};

// 1-bit Adam over an fp32 model without tensor parallelism. The momentum lives in one f32
// buffer per gradient bucket, laid out as the bucket (tag optimizer_state), the variance per
// parameter (optimizer_state), the compressor's errors and scratch in tag communication: all
// allocated by the constructor, in a dry run too. Calls sync.keep_local_from(freeze_step).
// Throws memtrain::RuntimeError for a 16-bit parameter or gradient, or freeze_step < 1.
// `params`, `buckets`, `sync` and `dp` must outlive it.
class OneBitAdam final : public Optimizer {
 public:
  OneBitAdam(std::vector<models::Parameter>& params, const std::vector<comms::GradientBucket>& buckets,
             comms::GradientSynchronizer& sync, comms::Communicator& dp, core::Context& ctx, AdamWOptions options,
             OneBitAdamOptions onebit);

  // Before the freeze (and with one rank), AdamW's; after it the sketch's estimate of the summed
  // gradient's norm (Note [1-bit Adam clips by a sketch of the summed norm]), collective over dp.
  double grad_norm() const override;
  bool grads_finite() const override;
  double clip_grad_norm(double max_norm) override;
  // Before the freeze AdamW's update; from it the compressed momentum step of the Note,
  // collective over dp.
  void step(double lr, double grad_multiplier = 1.0) override;
  std::int64_t step_count() const override { return step_; }
  const comms::GradientSyncStats* step_comm() const override { return &comm_; }

  bool frozen() const { return step_ >= onebit_.freeze_step; }
  // Parameter i's moments (for checkpoints and tests): [the parameter's shape].
  const core::Tensor& exp_avg(std::size_t i) const { return m_[i]; }
  const core::Tensor& exp_avg_sq(std::size_t i) const { return v_[i]; }
  // The momentum's compressor (null with one rank): its error feedback is checkpointed per rank
  // (Note [Compression state in checkpoints]).
  const comms::OneBitCompressor* compressor() const { return compressor_.get(); }
  comms::OneBitCompressor* compressor() { return compressor_.get(); }
  // A loaded checkpoint's count of completed steps (the freeze and bias correction follow it).
  void set_step_count(std::int64_t steps) override { step_ = steps; }
  // Replicated: exp_avg and exp_avg_sq per parameter (fp32 values are their own masters); the
  // compressor under "onebit_adam".
  OptimizerState state() const override;

 private:
  std::vector<models::Parameter>& params_;
  const std::vector<comms::GradientBucket>& buckets_;
  comms::Communicator& dp_;
  AdamWOptions options_;
  OneBitAdamOptions onebit_;
  bool dry_run_;
  std::vector<core::Tensor> m_buffers_;                  // [bucket numel] f32, per bucket
  std::vector<core::Tensor> m_, v_;                      // per parameter; m_ are views of m_buffers_
  std::unique_ptr<comms::OneBitCompressor> compressor_;  // with more than one rank
  std::int64_t step_ = 0;
  comms::GradientSyncStats comm_;               // this step's momentum sum
  mutable comms::GradientSyncStats norm_comm_;  // grad_norm's sketch sum, counted by the next step
};

}  // namespace memtrain::train
