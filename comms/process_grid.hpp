#pragma once
// The tensor x data parallel layout of a job (Megatron-LM's initialize_model_parallel, without
// pipeline stages): world = tp x dp ranks.
#include <memory>

#include "comms/communicator.hpp"

namespace memtrain::comms {

// Note [Rank order of the grid]
// The ranks of one tensor-parallel group are adjacent: rank = dp_rank x tp + tp_rank, as
// Megatron-LM orders them. Tensor parallelism sends activations at every layer, data
// parallelism gradients once a step, so the tp group is the one that should share a node (and
// its fastest links) when a job spans nodes; mpirun fills nodes with consecutive ranks.
//
// Owns the world group and the two sub-groups made from it with Communicator::split. With
// tp = 1 the tp group is a group of one and the dp group spans the world.
class ProcessGrid {
 public:
  // Splits `world` into tp groups of `tp` adjacent ranks and dp groups of the ranks with the
  // same tp_rank. Collective over `world`. Throws memtrain::ConfigError when tp < 1 or tp does
  // not divide world->size() (naming parallel.tensor_model_parallel_size).
  ProcessGrid(std::unique_ptr<Communicator> world, int tp);

  // Rank 0 of a tp x dp grid that exists only on paper, for dry runs and `memtrain plan`:
  // every group is a SimulatedWorldCommunicator of its size (world_size ranks, tp, and
  // world_size / tp). Throws memtrain::ConfigError as the constructor does.
  static ProcessGrid simulated(int world_size, int tp);

  Communicator& world() { return *world_; }
  Communicator& tp() { return *tp_; }
  Communicator& dp() { return *dp_; }
  const Communicator& world() const { return *world_; }
  int tp_size() const { return tp_->size(); }
  int tp_rank() const { return tp_->rank(); }
  int dp_size() const { return dp_->size(); }
  int dp_rank() const { return dp_->rank(); }

 private:
  ProcessGrid(std::unique_ptr<Communicator> world, std::unique_ptr<Communicator> tp, std::unique_ptr<Communicator> dp);

  std::unique_ptr<Communicator> world_;
  std::unique_ptr<Communicator> tp_;
  std::unique_ptr<Communicator> dp_;
};

// Throws memtrain::ConfigError when `tp` is < 1 or does not divide `world_size`: "the world of
// N ranks is not divisible by parallel.tensor_model_parallel_size = tp".
void check_grid(int world_size, int tp);

}  // namespace memtrain::comms
