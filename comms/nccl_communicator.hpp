#pragma once
// Collectives among GPUs through NCCL, behind the Communicator interface. Compiled only when
// nvcc was found (MEMTRAIN_HAVE_CUDA).
#if MEMTRAIN_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comms/communicator.hpp"

namespace memtrain::comms {

// One GPU per rank (issue 14). Every buffer handed to a collective is device memory on this
// rank's GPU. Each call is queued on the communicator's own stream (the communication stream,
// apart from the compute stream) and waited for before it returns, so a call completes like
// the MPI one it replaces; callers order it after their compute work themselves (an event, or
// a synchronized stream). Results: NCCL's ring and tree algorithms reduce each chunk once and
// distribute it, so every rank gets the same bits (Note [Collectives leave every rank with the
// same bits]). The variable-size in-place collectives of ZeRO-1 are grouped ncclReduce and
// ncclBroadcast calls, one per block; alltoall is grouped ncclSend/ncclRecv. Failures throw
// memtrain::RuntimeError naming the NCCL call and ncclGetErrorString.
class NcclCommunicator final : public Communicator {
 public:
  // Joins the NCCL clique of `bootstrap`'s ranks on `device` (CUDA_VISIBLE_DEVICES or the local
  // rank picks it): rank 0 creates the unique id and broadcasts it through `bootstrap` (MPI, or
  // the single-rank group), every rank calls ncclCommInitRank. Collective over bootstrap.
  static std::unique_ptr<NcclCommunicator> create(Communicator& bootstrap, int device);

  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  // Queues every later collective after the work queued by then on `compute` (an event recorded
  // there, which the communication stream waits for), so that buffers the compute stream's
  // kernels write (a training step's gradients) are final when NCCL reads them, without the host
  // waiting. Null: the callers order their work themselves (the default). Throws
  // memtrain::RuntimeError when CUDA fails.
  void order_after(cudaStream_t compute);

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
  // ncclCommSplit: the ranks passing the same color, ordered by key, then by rank.
  std::unique_ptr<Communicator> split(int color, int key) override;
  std::string backend() const override { return "nccl"; }
  // NCCL communicators must not be used by two threads at once (the NCCL documentation's
  // thread-safety rules); the gradient synchroniser's thread then waits for its turn.
  bool allows_concurrent_calls() const override { return false; }

 private:
  NcclCommunicator(ncclComm_t comm, int device, int local_rank, int local_size);
  void allreduce(void* data, std::int64_t n, ncclDataType_t type, ncclRedOp_t op);
  void allgather_bytes(const void* send, void* recv, std::int64_t bytes);
  void allgather_in_place_bytes(void* data, const std::vector<std::int64_t>& counts, std::size_t element);
  void alltoall_bytes(const void* send, void* recv, std::int64_t bytes);
  void begin();                   // selects the device; waits for order_after's stream when set
  void finish(const char* call);  // waits for the stream; throws on an NCCL or CUDA error

  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int rank_ = 0, size_ = 1, device_ = 0, local_rank_ = 0, local_size_ = 1;
  int* barrier_word_ = nullptr;     // one int of device memory for barrier()
  cudaStream_t compute_ = nullptr;  // order_after's stream, or null
  cudaEvent_t ready_ = nullptr;     // recorded on compute_ before each collective
};

}  // namespace memtrain::comms
#endif  // MEMTRAIN_HAVE_CUDA
