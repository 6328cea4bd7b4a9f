#pragma once
#include <mpi.h>

#include "comms/communicator.hpp"

namespace memtrain::comms {

// Collectives over an MPI communicator (MPI_COMM_WORLD by default). Node-local rank and size
// come from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) (MPI-3). Counts above INT_MAX are sent
// in chunks, since MPI counts are int.
class MpiCommunicator final : public Communicator {
 public:
  // Initialises MPI if needed (Note [MPI thread level]). `owned`: this object frees `comm`
  // (MPI_Comm_free) when destroyed, as for the groups that split() makes. Throws RuntimeError.
  explicit MpiCommunicator(MPI_Comm comm = MPI_COMM_WORLD, bool owned = false);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  void allreduce_sum(float* data, std::int64_t n) override;
  void allreduce_sum(double* data, std::int64_t n) override;
  void allreduce_sum(std::int64_t* data, std::int64_t n) override;
  void allreduce_max(float* data, std::int64_t n) override;
  void allreduce_max(double* data, std::int64_t n) override;
  void allgather(const float* send, float* recv, std::int64_t n) override;
  void allgather(const std::uint16_t* send, std::uint16_t* recv, std::int64_t n) override;
  void reduce_scatter_sum(const float* send, float* recv, std::int64_t n) override;
  void reduce_scatter_sum_in_place(float* data, const std::vector<std::int64_t>& counts) override;
  void allgather_in_place(float* data, const std::vector<std::int64_t>& counts) override;
  void allgather_in_place(std::uint16_t* data, const std::vector<std::int64_t>& counts) override;
  void alltoall(const float* send, float* recv, std::int64_t n) override;
  void alltoall(const std::uint16_t* send, std::uint16_t* recv, std::int64_t n) override;
  void broadcast(void* data, std::int64_t bytes, int root) override;
  void barrier() override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  std::string backend() const override { return "mpi"; }
  bool allows_concurrent_calls() const override { return thread_level() == MPI_THREAD_MULTIPLE; }

  // The thread level MPI granted (MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE).
  static int thread_level();

 private:
  MPI_Comm comm_;
  bool owned_;
  MPI_Comm local_comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
};

}  // namespace memtrain::comms
