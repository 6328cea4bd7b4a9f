#pragma once
// AdamW with its state sharded over the data-parallel ranks: ZeRO stage 1 (Rajbhandari et al.
// 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", section 5.1,
// P_os).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "comms/communicator.hpp"
#include "comms/gradient_bucket.hpp"
#include "comms/gradient_synchronizer.hpp"
#include "models/parameter.hpp"
#include "runtime/core/context.hpp"
#include "runtime/core/tensor.hpp"
#include "runtime/train/optimizer.hpp"

namespace memtrain::train {

// Note [ZeRO-1 shards the buckets]
// The optimizer state is split where the gradients already are: each gradient bucket of n
// elements is cut into dp blocks of ceil(n / dp) (comms::shard_counts), and data-parallel rank
// r owns block r of every bucket. The synchroniser reduce-scatters each bucket
// (GradientReduction::reduce_scatter), so after backward a rank holds the summed gradient of
// its blocks only; this optimizer keeps the fp32 moments (and, for 16-bit values, the fp32
// masters) of those blocks alone, updates them, writes the new values of its blocks into the
// bucket and all-gathers the buckets (GradientSynchronizer::all_gather_shards), from which
// every rank copies every parameter's new value. A block can start and end inside a
// parameter: the update walks "pieces", the parts of parameters inside a block. Per-parameter
// settings (weight decay, tensor-parallel sharding for the norm) come with each piece.
// Per rank this holds 2 + 2 + 12 / dp bytes per parameter in 16-bit modes (value, gradient;
// master and moments sharded) and 4 + 4 + 8 / dp in fp32, the paper's Psi (2 + 2 + K / N_d).
//
// The update of a piece is AdamW's (kernels::adamw_update) on the same f32 numbers as the
// replicated AdamW: the gradients come out of a reduce-scatter rather than an all-reduce (the
// same sum, added in another order), the rest is element-wise. So stage 1 follows stage 0 to
// rounding.
class ZeroAdamW final : public Optimizer {
 public:
  // params: the model's parameters (16-bit values without masters: ModelOptions::
  // master_weights false); buckets: the model's gradient buckets, synchronised by `sync` with
  // GradientReduction::reduce_scatter over the data-parallel group `dp`; tp_group: as AdamW's
  // (the norm's sharded parameters). Allocates this rank's moments (tag optimizer_state) and
  // masters (tag master_weight) from ctx, one flat buffer each, viewed per bucket; the masters
  // must be initialised through init_master before the first step (the model's
  // init_parameters callback). All references must outlive the optimizer. Throws memtrain::RuntimeError when sync does not reduce-scatter
  // or a 16-bit parameter still has a master.
  ZeroAdamW(std::vector<models::Parameter>& params, std::vector<comms::GradientBucket>& buckets,
            comms::GradientSynchronizer& sync, comms::Communicator& dp, core::Context& ctx, AdamWOptions options,
            comms::Communicator* tp_group = nullptr);

  // Copies this rank's pieces of parameter `param`'s f32 draw [numel] into its masters.
  void init_master(std::size_t param, const float* draw) override;
  bool takes_initial_draws() const override { return true; }

  // The norm of the summed gradients: each rank's squares over its blocks, all-reduced over dp
  // (Note [The global norm counts every element once] over tp). Collective.
  double grad_norm() const override;
  // Over this rank's blocks; train_step votes over the world.
  bool grads_finite() const override;
  double clip_grad_norm(double max_norm) override;
  // Updates this rank's blocks, then all-gathers the new values (collective over dp).
  void step(double lr, double grad_multiplier = 1.0) override;
  std::int64_t step_count() const override { return step_; }

  // Elements of the optimizer state this rank holds (the sum of its block sizes).
  std::int64_t shard_elements() const;
  // True when the values are 16-bit and the blocks keep f32 masters.
  bool has_masters() const;

  // One parameter's part of this rank's state, for checkpoints (checkpoint_saver.hpp): elements
  // [param_offset, param_offset + length) of parameter `param` (its flat [numel] order), as
  // [length] f32 arrays; master is null without masters. A block meets a parameter in one
  // range, and a parameter lies in one bucket, so a rank has at most one piece per parameter.
  using StatePiece = OptimizerState::Piece;
  // This rank's pieces (none of length 0), in block order. Not in a dry run (no memory).
  std::vector<StatePiece> state_pieces() const;
  // A loaded checkpoint's count of completed steps (bias correction continues from it).
  void set_step_count(std::int64_t steps) override { step_ = steps; }
  // Sharded: this rank's pieces (none in a dry run), shard_elements() and has_masters().
  OptimizerState state() const override;

 private:
  struct Piece {
    std::size_t param;
    std::int64_t param_offset;   // first element in the parameter
    std::int64_t bucket_offset;  // the same element in the bucket
    std::int64_t state_offset;   // in the block's moments and masters
    std::int64_t length;
  };
  struct Block {
    std::size_t bucket;
    std::int64_t begin = 0, count = 0;  // in the bucket
    core::Tensor exp_avg, exp_avg_sq;   // [count] f32
    core::Tensor master;                // [count] f32, 16-bit values only
    std::vector<Piece> pieces;
  };
  void update(Block& b, double lr, float multiplier);
  void pack(Block& b);
  void unpack();

  std::vector<models::Parameter>& params_;
  std::vector<comms::GradientBucket>& buckets_;
  comms::GradientSynchronizer& sync_;
  comms::Communicator& dp_;
  AdamWOptions options_;
  bool dry_run_;
  comms::Communicator* tp_group_;
  core::DType value_dtype_;
  std::vector<Block> blocks_;
  std::int64_t step_ = 0;
};

}  // namespace memtrain::train
