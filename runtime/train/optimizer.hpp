#pragma once
// AdamW over a model's parameters, with global-norm gradient clipping; on fp32 master weights
// when the parameters are stored in 16 bits.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "comms/communicator.hpp"
#include "comms/gradient_compressor.hpp"
#include "comms/gradient_sync_stats.hpp"
#include "kernels/op_context.hpp"
#include "models/parameter.hpp"
#include "runtime/core/context.hpp"
#include "runtime/core/tensor.hpp"

namespace memtrain::train {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  // applied only to parameters with Parameter::weight_decay
};

// Note [Optimizer state in checkpoints]
// An optimizer hands its state to checkpoints as handles onto its live buffers, in one of two
// forms, and the saver and the loader treat each form alike whichever optimizer gave it:
// - replicated: per-parameter tensors, the same on every data-parallel rank, written by
//   data-parallel rank 0 as "<parameter name>.<suffix>" (exp_avg, exp_avg_sq, master) in the
//   parameter's shape, and resharded over tensor-parallel sizes as the parameters are;
// - sharded (ZeRO-1): this rank's pieces of the flat state, written by every rank into its own
//   file with their element ranges, and resharded over data-parallel sizes by those ranges
//   (Note [ZeRO-1 checkpoints reshard by element ranges], checkpoint_loader.cpp).
// Its compressors' per-rank state goes into the compression file under their prefix (Note
// [Compression state in checkpoints]). The step count travels as "step" beside the state.
// The array names are those of the checkpoints written before this interface: they must stay.
struct OptimizerState {
  struct Tensor {
    std::size_t param;    // index into the model's parameters
    std::string suffix;   // "exp_avg": the array is "<parameter name>.exp_avg"
    core::Tensor tensor;  // a handle onto the live buffer, the parameter's shape
  };
  // Elements [param_offset, param_offset + length) of parameter `param` (its flat [numel]
  // order), as [length] f32 arrays; master is null without masters.
  struct Piece {
    std::size_t param;
    std::int64_t param_offset, length;
    float* exp_avg;
    float* exp_avg_sq;
    float* master;
  };
  std::vector<Tensor> replicated;
  bool sharded = false;             // the pieces below, not `replicated`, are the state
  bool masters = false;             // sharded: the pieces carry fp32 masters
  std::int64_t shard_elements = 0;  // sharded: elements this rank holds
  std::vector<Piece> pieces;        // sharded, not in a dry run (no memory)
  // "onebit_adam" -> 1-bit Adam's momentum compressor (absent with one rank).
  std::vector<std::pair<std::string, comms::GradientCompressor*>> compressors;
};

// What a training step asks of its optimizer (train_step): the global gradient norm, the fp16
// overflow check, clipping and one update. AdamW replicates its state on every data-parallel
// rank; ZeroAdamW (zero_adamw.hpp) shards it (ZeRO stage 1).
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Global L2 norm of the gradients as stored (times the loss scale, if any), accumulated in
  // double; the same on every rank. Not finite on every rank exactly when some rank has an inf
  // or NaN gradient element (Note [The norm pass is the overflow check], train_step.cpp).
  virtual double grad_norm() const = 0;
  // False when a gradient element this rank checks is inf or NaN. The training step decides
  // from grad_norm() instead; this pass remains for callers that need no norm.
  virtual bool grads_finite() const = 0;
  // Clips f32 gradients to max_norm (torch.nn.utils.clip_grad_norm_); returns the norm before.
  virtual double clip_grad_norm(double max_norm) = 0;
  // One update with learning rate lr, every gradient used as grad * grad_multiplier.
  virtual void step(double lr, double grad_multiplier = 1.0) = 0;
  virtual std::int64_t step_count() const = 0;
  // What the last step() communicated itself, beyond the gradient synchroniser (1-bit Adam's
  // momentum sum); null for optimizers that communicate nothing of their own.
  virtual const comms::GradientSyncStats* step_comm() const { return nullptr; }

  // The state a checkpoint saves and restores (Note [Optimizer state in checkpoints]): handles
  // onto the live buffers, which a load writes through. Writing through a const optimizer's
  // handles is the loader's business alone.
  virtual OptimizerState state() const = 0;
  // The number of steps taken, restored from a checkpoint: the next step's bias correction
  // (and 1-bit Adam's freeze) follow step_count + 1.
  virtual void set_step_count(std::int64_t steps) = 0;
  // True when the optimizer keeps fp32 masters of its own that the initial draws must reach
  // (ZeRO-1: init_parameters hands each parameter's draw to init_master).
  virtual bool takes_initial_draws() const { return false; }
  // Copies parameter `param`'s f32 draw [numel] into this optimizer's masters; nothing by default.
  virtual void init_master(std::size_t /*param*/, const float* /*draw*/) {}
};

// AdamW (Loshchilov & Hutter 2019, Algorithm 2, in torch.optim.AdamW's formulation; the update
// itself is kernels::adamw_update). The first and second moments m, v are fp32 tensors shaped
// like each parameter, allocated from `ctx` under the tag optimizer_state (so memory stats
// show what the optimizer costs: 8 bytes per parameter).
//
// Mixed precision (Micikevicius et al. 2018, section 3.1): a parameter whose value is f16 or
// bf16 has an f32 `master`. Its gradient (f16, bf16, or f32 with fp32_grad_accumulation) is
// read as float, the update runs on the master and the moments in f32, and the value is
// rewritten from the master rounded to nearest even (kernels/cpu/half_convert.hpp). An f32
// parameter is its own master and takes exactly the fp32 path of before (bitwise).
//
// Every kernel runs through the op API (kernels/ops/optimizer.hpp) on ctx's device: the
// moments are allocated from ctx, so they live where the parameters do. A 16-bit parameter
// whose gradient is stored in another dtype is staged through host memory and is CPU only
// (throws memtrain::RuntimeError at construction on a GPU context).
//
// In a dry run (ctx.dry_run()) the constructor allocates the same moments, and nothing else
// reads or writes tensor memory: norms are 0, gradients count as finite, step() only counts.
// Holds a reference to `params`: it must outlive the optimizer and keep its order and size.
class AdamW final : public Optimizer {
 public:
  // tp_group: the tensor-parallel group of a model whose parameters are sharded over it
  // (null or a group of one: none); grad_norm then takes one all-reduce over it.
  AdamW(std::vector<models::Parameter>& params, core::Context& ctx, AdamWOptions options,
        comms::Communicator* tp_group = nullptr);

  // Global L2 norm of all gradients as stored (still multiplied by the loss scale, if any),
  // sqrt(sum_p sum_i g_i^2) accumulated in double; 16-bit gradients are read as float. Under
  // tensor parallelism it is the norm of the unsharded model's gradient, the same on every
  // rank (Note [The global norm counts every element once]); collective over tp_group.
  double grad_norm() const override;

  // False when any gradient element is inf or NaN (the loss scaler's overflow check).
  bool grads_finite() const override;

  // torch.nn.utils.clip_grad_norm_: when max_norm > 0, scales every gradient in place by
  // min(1, max_norm / (norm + 1e-6)). Returns the norm before clipping. max_norm <= 0 only
  // measures the norm. For f32 gradients: 16-bit gradients are clipped without rounding them
  // twice through step's grad_multiplier instead (throws memtrain::RuntimeError when a
  // gradient to be scaled is 16-bit).
  double clip_grad_norm(double max_norm) override;

  // One update with learning rate `lr` (bias correction uses the step count, from 1). Every
  // gradient is used as grad * grad_multiplier (dimensionless): 1 / loss scale times the clip
  // factor, applied in f32 when the gradient is read, so that 16-bit gradients are never
  // rescaled in 16 bits. With grad_multiplier 1 an f32 parameter is updated exactly as before.
  void step(double lr, double grad_multiplier = 1.0) override;

  std::int64_t step_count() const override { return step_; }
  // The moments of parameter i (for checkpoints and tests): [same shape as the parameter].
  const core::Tensor& exp_avg(std::size_t i) const { return m_[i]; }
  const core::Tensor& exp_avg_sq(std::size_t i) const { return v_[i]; }
  // The same, to be overwritten when a checkpoint is loaded (checkpoint_loader.hpp).
  core::Tensor& exp_avg(std::size_t i) { return m_[i]; }
  core::Tensor& exp_avg_sq(std::size_t i) { return v_[i]; }
  void set_step_count(std::int64_t steps) override { step_ = steps; }
  // exp_avg, exp_avg_sq and, for 16-bit values, the parameter's master, per parameter.
  OptimizerState state() const override;

 private:
  std::vector<models::Parameter>& params_;
  AdamWOptions options_;
  bool dry_run_;
  // The op API's context of `ctx` (its device): every update, norm and check runs through it.
  kernels::OpContext kc_;
  comms::Communicator* tp_group_;
  std::vector<core::Tensor> m_;
  std::vector<core::Tensor> v_;
  std::int64_t step_ = 0;
};

// min(1, max_norm / (norm + 1e-6)) when max_norm > 0, else 1: torch.nn.utils.clip_grad_norm_'s
// factor for gradients whose global L2 norm is `norm`.
double clip_factor(double norm, double max_norm);

}  // namespace memtrain::train
