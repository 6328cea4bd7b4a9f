#include "comms/mpi_communicator.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>

#include "runtime/core/errors.hpp"

namespace memtrain::comms {
namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw RuntimeError(std::string("MPI ") + what + " failed: " + std::string(msg, len));
}

// MPI counts are int: split large buffers into chunks of at most INT_MAX elements.
template <class T>
void allreduce_chunked(T* data, std::int64_t n, MPI_Datatype type, MPI_Comm comm) {
  for (std::int64_t off = 0; off < n;) {
    const int count = static_cast<int>(std::min<std::int64_t>(n - off, INT_MAX));
    check(MPI_Allreduce(MPI_IN_PLACE, data + off, count, type, MPI_SUM, comm), "Allreduce");
    off += count;
  }
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm) : comm_(comm) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "Init_thread");
    std::atexit(finalize_at_exit);
  }
  check(MPI_Comm_rank(comm_, &rank_), "Comm_rank");
  check(MPI_Comm_size(comm_, &size_), "Comm_size");
  check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local_comm_),
        "Comm_split_type");
  check(MPI_Comm_rank(local_comm_, &local_rank_), "Comm_rank(local)");
  check(MPI_Comm_size(local_comm_, &local_size_), "Comm_size(local)");
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && local_comm_ != MPI_COMM_NULL) MPI_Comm_free(&local_comm_);
}

void MpiCommunicator::allreduce_sum(float* data, std::int64_t n) {
  allreduce_chunked(data, n, MPI_FLOAT, comm_);
}
void MpiCommunicator::allreduce_sum(double* data, std::int64_t n) {
  allreduce_chunked(data, n, MPI_DOUBLE, comm_);
}
void MpiCommunicator::allreduce_sum(std::int64_t* data, std::int64_t n) {
  allreduce_chunked(data, n, MPI_INT64_T, comm_);
}

void MpiCommunicator::broadcast(void* data, std::int64_t bytes, int root) {
  auto* p = static_cast<char*>(data);
  for (std::int64_t off = 0; off < bytes;) {
    const int count = static_cast<int>(std::min<std::int64_t>(bytes - off, INT_MAX));
    check(MPI_Bcast(p + off, count, MPI_BYTE, root, comm_), "Bcast");
    off += count;
  }
}

void MpiCommunicator::barrier() { check(MPI_Barrier(comm_), "Barrier"); }

}  // namespace memtrain::comms
