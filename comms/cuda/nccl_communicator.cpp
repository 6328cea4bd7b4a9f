#include "comms/nccl_communicator.hpp"

#include <algorithm>
#include <climits>
#include <exception>
#include <string>

#include "runtime/core/errors.hpp"

namespace memtrain::comms {
namespace {

void check(ncclResult_t r, const char* call) {
  if (r != ncclSuccess) throw RuntimeError(std::string(call) + ": " + ncclGetErrorString(r));
}
void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess) {
    throw RuntimeError(std::string(call) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
  }
}

void check_counts(const std::vector<std::int64_t>& counts, int size, const char* who) {
  if (static_cast<int>(counts.size()) != size) {
    throw RuntimeError(std::string(who) + ": " + std::to_string(counts.size()) + " counts for a group of " +
                       std::to_string(size));
  }
  for (std::int64_t c : counts) {
    if (c < 0 || c > INT_MAX) throw RuntimeError(std::string(who) + ": count " + std::to_string(c) + " out of range");
  }
}

}  // namespace

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(Communicator& bootstrap, int device) {
  check(cudaSetDevice(device), "cudaSetDevice");
  ncclUniqueId id{};
  if (bootstrap.rank() == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  bootstrap.broadcast(&id, sizeof id, 0);
  ncclComm_t comm = nullptr;
  check(ncclCommInitRank(&comm, bootstrap.size(), id, bootstrap.rank()), "ncclCommInitRank");
  return std::unique_ptr<NcclCommunicator>(
      new NcclCommunicator(comm, device, bootstrap.local_rank(), bootstrap.local_size()));
}

NcclCommunicator::NcclCommunicator(ncclComm_t comm, int device, int local_rank, int local_size)
    : comm_(comm), device_(device), local_rank_(local_rank), local_size_(local_size) {
  check(ncclCommUserRank(comm_, &rank_), "ncclCommUserRank");
  check(ncclCommCount(comm_, &size_), "ncclCommCount");
  check(cudaSetDevice(device_), "cudaSetDevice");
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  void* word = nullptr;
  check(cudaMalloc(&word, sizeof(int)), "cudaMalloc");
  barrier_word_ = static_cast<int*>(word);
}

NcclCommunicator::~NcclCommunicator() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (ready_ != nullptr) cudaEventDestroy(ready_);
  // Unwinding from an error, the peers may be inside a collective that will never complete:
  // ncclCommAbort does not wait for them (ncclCommDestroy may), so the error reaches the
  // trainer's report and MPI_Abort instead of hanging the job.
  if (comm_ != nullptr) {
    if (std::uncaught_exceptions() > 0) {
      ncclCommAbort(comm_);
    } else {
      ncclCommDestroy(comm_);
    }
  }
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  cudaFree(barrier_word_);
}

void NcclCommunicator::order_after(cudaStream_t compute) {
  check(cudaSetDevice(device_), "cudaSetDevice");
  if (compute != nullptr && ready_ == nullptr) {
    check(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  }
  compute_ = compute;
}

void NcclCommunicator::begin() {
  check(cudaSetDevice(device_), "cudaSetDevice");
  if (compute_ == nullptr) return;
  check(cudaEventRecord(ready_, compute_), "cudaEventRecord");
  check(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent");
}

void NcclCommunicator::finish(const char* call) {
  check(cudaStreamSynchronize(stream_), call);
  ncclResult_t async_error = ncclSuccess;
  check(ncclCommGetAsyncError(comm_, &async_error), "ncclCommGetAsyncError");
  check(async_error, call);
}

void NcclCommunicator::allreduce(void* data, std::int64_t n, ncclDataType_t type, ncclRedOp_t op) {
  if (n == 0) return;
  begin();
  check(ncclAllReduce(data, data, static_cast<std::size_t>(n), type, op, comm_, stream_), "ncclAllReduce");
  finish("ncclAllReduce");
}

void NcclCommunicator::allreduce_sum(float* data, std::int64_t n) { allreduce(data, n, ncclFloat32, ncclSum); }
void NcclCommunicator::allreduce_sum(double* data, std::int64_t n) { allreduce(data, n, ncclFloat64, ncclSum); }
void NcclCommunicator::allreduce_sum(std::int64_t* data, std::int64_t n) { allreduce(data, n, ncclInt64, ncclSum); }
void NcclCommunicator::allreduce_max(float* data, std::int64_t n) { allreduce(data, n, ncclFloat32, ncclMax); }
void NcclCommunicator::allreduce_max(double* data, std::int64_t n) { allreduce(data, n, ncclFloat64, ncclMax); }

void NcclCommunicator::allgather_bytes(const void* send, void* recv, std::int64_t bytes) {
  if (bytes == 0) return;
  begin();
  check(ncclAllGather(send, recv, static_cast<std::size_t>(bytes), ncclUint8, comm_, stream_), "ncclAllGather");
  finish("ncclAllGather");
}
void NcclCommunicator::allgather(const float* send, float* recv, std::int64_t n) {
  allgather_bytes(send, recv, n * static_cast<std::int64_t>(sizeof(float)));
}
void NcclCommunicator::allgather(const std::uint16_t* send, std::uint16_t* recv, std::int64_t n) {
  allgather_bytes(send, recv, n * 2);
}

void NcclCommunicator::reduce_scatter_sum(const float* send, float* recv, std::int64_t n) {
  if (n == 0) return;
  begin();
  check(ncclReduceScatter(send, recv, static_cast<std::size_t>(n), ncclFloat32, ncclSum, comm_, stream_),
        "ncclReduceScatter");
  finish("ncclReduceScatter");
}

// Block j is reduced onto rank j (one ncclReduce per block, grouped so they progress
// together), then this rank's block moves to the front of data as the MPI_IN_PLACE form leaves
// it. The move goes forward in pieces no longer than the distance, so no piece overlaps the
// bytes it reads.
void NcclCommunicator::reduce_scatter_sum_in_place(float* data, const std::vector<std::int64_t>& counts) {
  check_counts(counts, size_, "reduce_scatter_sum_in_place");
  begin();
  std::int64_t offset = 0, mine = 0;
  check(ncclGroupStart(), "ncclGroupStart");
  for (int j = 0; j < size_; ++j) {
    if (j == rank_) mine = offset;
    if (counts[j] > 0) {
      check(ncclReduce(data + offset, data + offset, static_cast<std::size_t>(counts[j]), ncclFloat32, ncclSum, j,
                       comm_, stream_),
            "ncclReduce");
    }
    offset += counts[j];
  }
  check(ncclGroupEnd(), "ncclGroupEnd");
  for (std::int64_t moved = 0; mine > 0 && moved < counts[rank_];) {
    const std::int64_t piece = std::min(mine, counts[rank_] - moved);
    check(cudaMemcpyAsync(data + moved, data + mine + moved, piece * sizeof(float), cudaMemcpyDeviceToDevice, stream_),
          "cudaMemcpyAsync");
    moved += piece;
  }
  finish("ncclReduce");
}

// Block j is broadcast from rank j, grouped.
void NcclCommunicator::allgather_in_place_bytes(void* data, const std::vector<std::int64_t>& counts,
                                                std::size_t element) {
  check_counts(counts, size_, "allgather_in_place");
  begin();
  auto* bytes = static_cast<char*>(data);
  std::int64_t offset = 0;
  check(ncclGroupStart(), "ncclGroupStart");
  for (int j = 0; j < size_; ++j) {
    if (counts[j] > 0) {
      check(ncclBroadcast(bytes + offset * element, bytes + offset * element, counts[j] * element, ncclUint8, j, comm_,
                          stream_),
            "ncclBroadcast");
    }
    offset += counts[j];
  }
  check(ncclGroupEnd(), "ncclGroupEnd");
  finish("ncclBroadcast");
}
void NcclCommunicator::allgather_in_place(float* data, const std::vector<std::int64_t>& counts) {
  allgather_in_place_bytes(data, counts, sizeof(float));
}
void NcclCommunicator::allgather_in_place(std::uint16_t* data, const std::vector<std::int64_t>& counts) {
  allgather_in_place_bytes(data, counts, 2);
}

void NcclCommunicator::alltoall_bytes(const void* send, void* recv, std::int64_t bytes) {
  if (bytes == 0) return;
  begin();
  const auto* s = static_cast<const char*>(send);
  auto* r = static_cast<char*>(recv);
  check(ncclGroupStart(), "ncclGroupStart");
  for (int j = 0; j < size_; ++j) {
    check(ncclSend(s + j * bytes, static_cast<std::size_t>(bytes), ncclUint8, j, comm_, stream_), "ncclSend");
    check(ncclRecv(r + j * bytes, static_cast<std::size_t>(bytes), ncclUint8, j, comm_, stream_), "ncclRecv");
  }
  check(ncclGroupEnd(), "ncclGroupEnd");
  finish("ncclSend/ncclRecv");
}
void NcclCommunicator::alltoall(const float* send, float* recv, std::int64_t n) {
  alltoall_bytes(send, recv, n * static_cast<std::int64_t>(sizeof(float)));
}
void NcclCommunicator::alltoall(const std::uint16_t* send, std::uint16_t* recv, std::int64_t n) {
  alltoall_bytes(send, recv, n * 2);
}

void NcclCommunicator::broadcast(void* data, std::int64_t bytes, int root) {
  if (bytes == 0) return;
  begin();
  check(ncclBroadcast(data, data, static_cast<std::size_t>(bytes), ncclUint8, root, comm_, stream_), "ncclBroadcast");
  finish("ncclBroadcast");
}

void NcclCommunicator::barrier() { allreduce(barrier_word_, 1, ncclInt32, ncclSum); }

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) {
  if (color < 0) throw RuntimeError("NcclCommunicator::split: color " + std::to_string(color) + " is negative");
  begin();
  ncclComm_t sub = nullptr;
  check(ncclCommSplit(comm_, color, key, &sub, nullptr), "ncclCommSplit");
  // local_rank/local_size describe the host, which a split does not change.
  return std::unique_ptr<Communicator>(new NcclCommunicator(sub, device_, local_rank_, local_size_));
}

}  // namespace memtrain::comms
