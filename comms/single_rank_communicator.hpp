#pragma once
#include "comms/communicator.hpp"

namespace memtrain::comms {

// The group of one: every collective is the identity. Used when not launched by mpirun.
class SingleRankCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  void allreduce_sum(float*, std::int64_t) override {}
  void allreduce_sum(double*, std::int64_t) override {}
  void allreduce_sum(std::int64_t*, std::int64_t) override {}
  void broadcast(void*, std::int64_t, int) override {}
  void barrier() override {}
  std::string backend() const override { return "single"; }
};

}  // namespace memtrain::comms
