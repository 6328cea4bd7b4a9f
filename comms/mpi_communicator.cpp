#include "comms/mpi_communicator.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include "comms/shard_layout.hpp"
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

// MPI counts are int: an element-wise collective over [n] is cut into chunks of at most
// INT_MAX elements, each its own call.
template <class T>
void allreduce_chunked(T* data, std::int64_t n, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  for (std::int64_t off = 0; off < n;) {
    const int count = static_cast<int>(std::min<std::int64_t>(n - off, INT_MAX));
    check(MPI_Allreduce(MPI_IN_PLACE, data + off, count, type, op, comm), "Allreduce");
    off += count;
  }
}

// The per-rank block collectives take one count for every rank; a block above INT_MAX
// elements would need derived datatypes, which no caller needs (tensor-parallel blocks are
// one activation shard).
int block_count(std::int64_t n, const char* what) {
  if (n < 0 || n > INT_MAX) {
    throw RuntimeError(std::string("MPI ") + what + ": a block of " + std::to_string(n) + " elements; expected 0 to " +
                       std::to_string(INT_MAX));
  }
  return static_cast<int>(n);
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

int g_thread_level = -1;

// Note [MPI thread level]
// Gradient buckets are reduced on a communication thread while backward runs (issue 11), so
// MPI must accept calls from a thread other than main: MPI_THREAD_MULTIPLE is asked for, and
// MPI_THREAD_SERIALIZED (one thread at a time, which a single thread owning all MPI calls
// satisfies) is the least that is accepted. FUNNELED or SINGLE would make such a thread
// undefined behaviour, so it is refused at start rather than discovered as a hang.
void initialize_mpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) {
    if (g_thread_level < 0) MPI_Query_thread(&g_thread_level);
    return;
  }
  int provided = MPI_THREAD_SINGLE;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "Init_thread");
  std::atexit(finalize_at_exit);
  g_thread_level = provided;
  if (provided < MPI_THREAD_SERIALIZED) {
    throw RuntimeError("MPI granted thread level " + std::to_string(provided) +
                       " (MPI_THREAD_SINGLE = 0, FUNNELED = 1); memtrain needs at least "
                       "MPI_THREAD_SERIALIZED (2); rebuild or configure the MPI library with "
                       "thread support");
  }
}

}  // namespace

int MpiCommunicator::thread_level() { return g_thread_level; }

MpiCommunicator::MpiCommunicator(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
  initialize_mpi();
  check(MPI_Comm_rank(comm_, &rank_), "Comm_rank");
  check(MPI_Comm_size(comm_, &size_), "Comm_size");
  check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local_comm_), "Comm_split_type");
  check(MPI_Comm_rank(local_comm_, &local_rank_), "Comm_rank(local)");
  check(MPI_Comm_size(local_comm_, &local_size_), "Comm_size(local)");
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (local_comm_ != MPI_COMM_NULL) MPI_Comm_free(&local_comm_);
  if (owned_ && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::allreduce_sum(float* data, std::int64_t n) {
  allreduce_chunked(data, n, MPI_FLOAT, MPI_SUM, comm_);
}
void MpiCommunicator::allreduce_sum(double* data, std::int64_t n) {
  allreduce_chunked(data, n, MPI_DOUBLE, MPI_SUM, comm_);
}
void MpiCommunicator::allreduce_sum(std::int64_t* data, std::int64_t n) {
  allreduce_chunked(data, n, MPI_INT64_T, MPI_SUM, comm_);
}
void MpiCommunicator::allreduce_max(float* data, std::int64_t n) {
  allreduce_chunked(data, n, MPI_FLOAT, MPI_MAX, comm_);
}
void MpiCommunicator::allreduce_max(double* data, std::int64_t n) {
  allreduce_chunked(data, n, MPI_DOUBLE, MPI_MAX, comm_);
}

void MpiCommunicator::allgather(const float* send, float* recv, std::int64_t n) {
  const int count = block_count(n, "Allgather");
  check(MPI_Allgather(send, count, MPI_FLOAT, recv, count, MPI_FLOAT, comm_), "Allgather");
}
void MpiCommunicator::allgather(const std::uint16_t* send, std::uint16_t* recv, std::int64_t n) {
  const int count = block_count(n, "Allgather");
  check(MPI_Allgather(send, count, MPI_UINT16_T, recv, count, MPI_UINT16_T, comm_), "Allgather");
}

void MpiCommunicator::reduce_scatter_sum(const float* send, float* recv, std::int64_t n) {
  const int count = block_count(n, "Reduce_scatter_block");
  check(MPI_Reduce_scatter_block(send, recv, count, MPI_FLOAT, MPI_SUM, comm_), "Reduce_scatter_block");
}

namespace {

// counts and displacements as MPI's int arrays (checked: check_block_counts).
struct IntBlocks {
  std::vector<int> counts, displs;
  IntBlocks(const std::vector<std::int64_t>& c, int size, const char* what) {
    check_block_counts(c, size, what);
    std::int64_t offset = 0;
    for (std::int64_t n : c) {
      if (offset > INT_MAX) {
        throw RuntimeError(std::string("MPI ") + what + ": a displacement of " + std::to_string(offset) +
                           " elements; expected at most " + std::to_string(INT_MAX));
      }
      counts.push_back(static_cast<int>(n));
      displs.push_back(static_cast<int>(offset));
      offset += n;
    }
  }
};

}  // namespace

void MpiCommunicator::reduce_scatter_sum_in_place(float* data, const std::vector<std::int64_t>& counts) {
  const IntBlocks b(counts, size_, "Reduce_scatter");
  check(MPI_Reduce_scatter(MPI_IN_PLACE, data, b.counts.data(), MPI_FLOAT, MPI_SUM, comm_), "Reduce_scatter");
}
void MpiCommunicator::allgather_in_place(float* data, const std::vector<std::int64_t>& counts) {
  const IntBlocks b(counts, size_, "Allgatherv");
  check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, b.counts.data(), b.displs.data(), MPI_FLOAT, comm_),
        "Allgatherv");
}
void MpiCommunicator::allgather_in_place(std::uint16_t* data, const std::vector<std::int64_t>& counts) {
  const IntBlocks b(counts, size_, "Allgatherv");
  check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, b.counts.data(), b.displs.data(), MPI_UINT16_T, comm_),
        "Allgatherv");
}

void MpiCommunicator::alltoall(const float* send, float* recv, std::int64_t n) {
  const int count = block_count(n, "Alltoall");
  check(MPI_Alltoall(send, count, MPI_FLOAT, recv, count, MPI_FLOAT, comm_), "Alltoall");
}
void MpiCommunicator::alltoall(const std::uint16_t* send, std::uint16_t* recv, std::int64_t n) {
  const int count = block_count(n, "Alltoall");
  check(MPI_Alltoall(send, count, MPI_UINT16_T, recv, count, MPI_UINT16_T, comm_), "Alltoall");
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

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  if (color < 0) {
    throw RuntimeError("Communicator::split: color = " + std::to_string(color) + "; expected >= 0");
  }
  MPI_Comm sub = MPI_COMM_NULL;
  check(MPI_Comm_split(comm_, color, key, &sub), "Comm_split");
  return std::make_unique<MpiCommunicator>(sub, /*owned=*/true);
}

}  // namespace memtrain::comms
