#pragma once
#include <string>
#include <utility>

#include "comms/communicator.hpp"

namespace memtrain::comms {

// Rank 0 of a world of `size` ranks that exist only on paper: every collective leaves this
// rank's values as they are. A dry run uses it to plan one rank of a data-parallel job (what a
// rank allocates depends on the world size, never on the other ranks' data); with size 1 it is
// the real group of one (SingleRankCommunicator).
class SimulatedWorldCommunicator : public Communicator {
 public:
  explicit SimulatedWorldCommunicator(int size, std::string backend = "simulated")
      : size_(size), backend_(std::move(backend)) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  void allreduce_sum(float*, std::int64_t) override {}
  void allreduce_sum(double*, std::int64_t) override {}
  void allreduce_sum(std::int64_t*, std::int64_t) override {}
  void broadcast(void*, std::int64_t, int) override {}
  void barrier() override {}
  std::string backend() const override { return backend_; }

 private:
  int size_;
  std::string backend_;
};

}  // namespace memtrain::comms
