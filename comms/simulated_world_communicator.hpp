#pragma once
#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "comms/communicator.hpp"
#include "comms/shard_layout.hpp"

namespace memtrain::comms {

// Rank 0 of a world of `size` ranks that exist only on paper. A dry run uses it to plan one rank
// of a job: what a rank allocates depends on the group sizes, never on the other ranks' data.
// The other ranks count as contributing nothing to a sum or maximum (every all-reduce leaves
// this rank's values as they are) and as holding this rank's data (a gather repeats `send`
// in every block; an all-to-all returns each block where it was; a reduce-scatter keeps block
// 0). With size 1 each of these is the exact collective of a group of one
// (SingleRankCommunicator).
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
  void allreduce_max(float*, std::int64_t) override {}
  void allreduce_max(double*, std::int64_t) override {}
  void allgather(const float* send, float* recv, std::int64_t n) override { repeat(send, recv, n); }
  void allgather(const std::uint16_t* send, std::uint16_t* recv, std::int64_t n) override { repeat(send, recv, n); }
  void reduce_scatter_sum(const float* send, float* recv, std::int64_t n) override { copy(send, recv, n); }
  // Block 0 is where a reduce-scatter leaves it (the others add nothing); a gather leaves the
  // other ranks' blocks as they are.
  void reduce_scatter_sum_in_place(float*, const std::vector<std::int64_t>& counts) override { check_counts(counts); }
  void allgather_in_place(float*, const std::vector<std::int64_t>& counts) override { check_counts(counts); }
  void allgather_in_place(std::uint16_t*, const std::vector<std::int64_t>& counts) override { check_counts(counts); }
  void alltoall(const float* send, float* recv, std::int64_t n) override { copy(send, recv, n * size_); }
  void alltoall(const std::uint16_t* send, std::uint16_t* recv, std::int64_t n) override {
    copy(send, recv, n * size_);
  }
  void broadcast(void*, std::int64_t, int) override {}
  void barrier() override {}
  // A group of one splits into itself. A larger simulated world cannot: the other ranks'
  // colors are unknown (ProcessGrid::simulated builds simulated sub-groups directly).
  // Throws memtrain::RuntimeError for size > 1 or a negative color.
  std::unique_ptr<Communicator> split(int color, int key) override;
  std::string backend() const override { return backend_; }

 private:
  void check_counts(const std::vector<std::int64_t>& counts) const {
    check_block_counts(counts, size_, "in-place collective");
  }
  template <class T>
  static void copy(const T* send, T* recv, std::int64_t n) {
    if (send != recv) std::copy(send, send + n, recv);
  }
  template <class T>
  void repeat(const T* send, T* recv, std::int64_t n) const {
    for (int r = 0; r < size_; ++r) copy(send, recv + r * n, n);
  }

  int size_;
  std::string backend_;
};

}  // namespace memtrain::comms
