#pragma once
// A Communicator adaptor that counts what passes through it (RMM's statistics adaptor, for
// collectives): the trainer wraps the tensor-parallel group in one to report the bytes and
// time of the tensor-parallel collectives per step.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "comms/communicator.hpp"

namespace memtrain::comms {

// Totals since construction. bytes: what this rank hands to the collectives (n elements x
// element size for an all-reduce or a gather's send block; the whole send buffer of a
// reduce-scatter or all-to-all; a broadcast's bytes), which with a ring algorithm is about what
// each rank sends. seconds: wall time inside the calls (waiting for slower ranks included).
struct CollectiveCounts {
  std::int64_t calls = 0;
  std::int64_t bytes = 0;
  double seconds = 0.0;
};

// Forwards every call to `inner` (which must outlive it) and counts it. split() returns the
// inner group's sub-group, uncounted. Not thread-safe (one thread owns a group's calls).
class CountingCommunicator final : public Communicator {
 public:
  explicit CountingCommunicator(Communicator& inner) : inner_(inner) {}

  const CollectiveCounts& counts() const { return counts_; }

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  int local_rank() const override { return inner_.local_rank(); }
  int local_size() const override { return inner_.local_size(); }
  bool allows_concurrent_calls() const override { return inner_.allows_concurrent_calls(); }
  void allreduce_sum(float* d, std::int64_t n) override {
    timed(n * 4, [&] { inner_.allreduce_sum(d, n); });
  }
  void allreduce_sum(double* d, std::int64_t n) override {
    timed(n * 8, [&] { inner_.allreduce_sum(d, n); });
  }
  void allreduce_sum(std::int64_t* d, std::int64_t n) override {
    timed(n * 8, [&] { inner_.allreduce_sum(d, n); });
  }
  void allreduce_max(float* d, std::int64_t n) override {
    timed(n * 4, [&] { inner_.allreduce_max(d, n); });
  }
  void allreduce_max(double* d, std::int64_t n) override {
    timed(n * 8, [&] { inner_.allreduce_max(d, n); });
  }
  void allgather(const float* s, float* r, std::int64_t n) override {
    timed(n * 4, [&] { inner_.allgather(s, r, n); });
  }
  void allgather(const std::uint16_t* s, std::uint16_t* r, std::int64_t n) override {
    timed(n * 2, [&] { inner_.allgather(s, r, n); });
  }
  void reduce_scatter_sum(const float* s, float* r, std::int64_t n) override {
    timed(n * 4 * size(), [&] { inner_.reduce_scatter_sum(s, r, n); });
  }
  void reduce_scatter_sum_in_place(float* d, const std::vector<std::int64_t>& counts) override {
    timed(total(counts) * 4, [&] { inner_.reduce_scatter_sum_in_place(d, counts); });
  }
  void allgather_in_place(float* d, const std::vector<std::int64_t>& counts) override {
    timed(mine(counts) * 4, [&] { inner_.allgather_in_place(d, counts); });
  }
  void allgather_in_place(std::uint16_t* d, const std::vector<std::int64_t>& counts) override {
    timed(mine(counts) * 2, [&] { inner_.allgather_in_place(d, counts); });
  }
  void alltoall(const float* s, float* r, std::int64_t n) override {
    timed(n * 4 * size(), [&] { inner_.alltoall(s, r, n); });
  }
  void alltoall(const std::uint16_t* s, std::uint16_t* r, std::int64_t n) override {
    timed(n * 2 * size(), [&] { inner_.alltoall(s, r, n); });
  }
  void broadcast(void* d, std::int64_t bytes, int root) override {
    timed(bytes, [&] { inner_.broadcast(d, bytes, root); });
  }
  void barrier() override {
    timed(0, [&] { inner_.barrier(); });
  }
  std::unique_ptr<Communicator> split(int color, int key) override { return inner_.split(color, key); }
  std::string backend() const override { return inner_.backend(); }

 private:
  static std::int64_t total(const std::vector<std::int64_t>& counts) {
    std::int64_t n = 0;
    for (std::int64_t c : counts) n += c;
    return n;
  }
  std::int64_t mine(const std::vector<std::int64_t>& counts) const {
    return static_cast<std::size_t>(rank()) < counts.size() ? counts[static_cast<std::size_t>(rank())] : 0;
  }
  template <class Call>
  void timed(std::int64_t bytes, Call&& call) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    counts_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    counts_.bytes += bytes;
    ++counts_.calls;
  }

  Communicator& inner_;
  CollectiveCounts counts_;
};

}  // namespace memtrain::comms
