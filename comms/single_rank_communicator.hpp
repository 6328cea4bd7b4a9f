#pragma once
#include "comms/simulated_world_communicator.hpp"

namespace memtrain::comms {

// The group of one: every collective is the identity. Used when not launched by mpirun.
class SingleRankCommunicator final : public SimulatedWorldCommunicator {
 public:
  SingleRankCommunicator() : SimulatedWorldCommunicator(1, "single") {}
};

}  // namespace memtrain::comms
