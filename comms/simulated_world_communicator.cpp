#include "comms/simulated_world_communicator.hpp"

#include "comms/single_rank_communicator.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::comms {

std::unique_ptr<Communicator> SimulatedWorldCommunicator::split(int color, int /*key*/) {
  if (color < 0) {
    throw RuntimeError("Communicator::split: color = " + std::to_string(color) + "; expected >= 0");
  }
  if (size_ > 1) {
    throw RuntimeError("a simulated world of " + std::to_string(size_) +
                       " ranks cannot be split (the other ranks' colors are unknown); use "
                       "ProcessGrid::simulated");
  }
  return std::make_unique<SingleRankCommunicator>();
}

}  // namespace memtrain::comms
