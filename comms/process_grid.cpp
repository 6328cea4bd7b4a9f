#include "comms/process_grid.hpp"

#include <string>
#include <utility>

#include "comms/simulated_world_communicator.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::comms {

void check_grid(int world_size, int tp) {
  if (tp < 1 || world_size < 1 || world_size % tp != 0) {
    throw ConfigError("parallel.tensor_model_parallel_size = " + std::to_string(tp) + " does not divide the world of " +
                      std::to_string(world_size) +
                      " ranks; expected a rank count that is a multiple of it (world = "
                      "tensor_model_parallel_size x data-parallel size)");
  }
}

ProcessGrid::ProcessGrid(std::unique_ptr<Communicator> world, std::unique_ptr<Communicator> tp,
                         std::unique_ptr<Communicator> dp)
    : world_(std::move(world)), tp_(std::move(tp)), dp_(std::move(dp)) {}

ProcessGrid::ProcessGrid(std::unique_ptr<Communicator> world, int tp) : world_(std::move(world)) {
  check_grid(world_->size(), tp);
  const int rank = world_->rank();
  // Note [Rank order of the grid]
  tp_ = world_->split(/*color=*/rank / tp, /*key=*/rank % tp);
  dp_ = world_->split(/*color=*/rank % tp, /*key=*/rank / tp);
}

ProcessGrid ProcessGrid::simulated(int world_size, int tp) {
  check_grid(world_size, tp);
  return ProcessGrid(std::make_unique<SimulatedWorldCommunicator>(world_size),
                     std::make_unique<SimulatedWorldCommunicator>(tp),
                     std::make_unique<SimulatedWorldCommunicator>(world_size / tp));
}

}  // namespace memtrain::comms
