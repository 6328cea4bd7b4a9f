#pragma once
// A process group for collective operations on host buffers. comms/ sees buffers, not models
// (design.md): tensor-parallel layers, gradient synchronisation and, later, compression sit on
// top of this interface.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace memtrain::comms {

// Note [Collectives leave every rank with the same bits]
// Tensor parallelism relies on replicated values (LayerNorm weights, row-parallel biases) being
// bitwise equal on every rank of a group: each rank updates its copy from gradients that came
// out of an all-reduce, and a one-ulp difference would grow into drift (Megatron-LM #1446).
// MPI's standard asks implementations to give every rank the same result of MPI_Allreduce
// ("advice to implementors", MPI 4.0 sec. 6.9.1) and Open MPI's algorithms do (the reduction
// of each chunk happens once and is then distributed, or pairs add in the commutative order
// a + b == b + a). Callers may therefore treat an all-reduce result as replicated.
class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Rank and number of ranks on this node (host), used to divide the cores between ranks.
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;

  // In-place sum over all ranks of data [n]; every rank gets the result (MPI_Allreduce).
  virtual void allreduce_sum(float* data, std::int64_t n) = 0;
  virtual void allreduce_sum(double* data, std::int64_t n) = 0;
  virtual void allreduce_sum(std::int64_t* data, std::int64_t n) = 0;
  // In-place element-wise maximum over all ranks of data [n] (MPI_Allreduce, MPI_MAX). The
  // vocabulary-parallel softmax takes its row maxima with it.
  virtual void allreduce_max(float* data, std::int64_t n) = 0;
  virtual void allreduce_max(double* data, std::int64_t n) = 0;
  // recv [size() * n] = the send [n] of every rank, in rank order (MPI_Allgather). The 16-bit
  // overload moves f16/bf16 storage as raw 16-bit words: a gather does no arithmetic.
  virtual void allgather(const float* send, float* recv, std::int64_t n) = 0;
  virtual void allgather(const std::uint16_t* send, std::uint16_t* recv, std::int64_t n) = 0;
  // recv [n] = sum over ranks of send [size() * n]'s block rank() (MPI_Reduce_scatter_block).
  virtual void reduce_scatter_sum(const float* send, float* recv, std::int64_t n) = 0;
  // The variable-size, in-place collectives of ZeRO-1's shards. data holds size() blocks laid
  // out back to back, block j of counts[j] elements (counts has size() entries, the same on
  // every rank). reduce_scatter_sum_in_place: on return data[0, counts[rank()]) is the sum over
  // ranks of block rank() (MPI_Reduce_scatter with MPI_IN_PLACE; the rest of data is left
  // undefined). allgather_in_place: every rank's block rank() lands in block rank() of every
  // rank's data (MPI_Allgatherv with MPI_IN_PLACE; the 16-bit overload moves raw words).
  // Throws memtrain::RuntimeError when counts.size() != size() or a count is negative or
  // above INT_MAX.
  virtual void reduce_scatter_sum_in_place(float* data, const std::vector<std::int64_t>& counts) = 0;
  virtual void allgather_in_place(float* data, const std::vector<std::int64_t>& counts) = 0;
  virtual void allgather_in_place(std::uint16_t* data, const std::vector<std::int64_t>& counts) = 0;
  // Block j [n] of send [size() * n] goes to rank j, where it lands as block rank() of recv
  // [size() * n] (MPI_Alltoall).
  virtual void alltoall(const float* send, float* recv, std::int64_t n) = 0;
  virtual void alltoall(const std::uint16_t* send, std::uint16_t* recv, std::int64_t n) = 0;
  // Copies `bytes` bytes from `root` to every rank (MPI_Bcast).
  virtual void broadcast(void* data, std::int64_t bytes, int root) = 0;
  virtual void barrier() = 0;

  // The sub-group of the ranks that pass the same `color` (>= 0), ordered by `key`, then by
  // rank (MPI_Comm_split). Collective over this group. The sub-group's resources are freed
  // when the returned object is dropped. Throws memtrain::RuntimeError for a negative color
  // or an MPI failure.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  // Human-readable backend name ("single", "mpi", "simulated").
  virtual std::string backend() const = 0;
  // Whether two threads may call collectives (of this group and of others) at the same time:
  // MPI_THREAD_MULTIPLE for MPI (Note [MPI thread level]). The gradient synchroniser's thread
  // overlaps a tensor-parallel backward only when it is true.
  virtual bool allows_concurrent_calls() const { return true; }
};

// The world group of this process: MPI when launched by mpirun (Open MPI's
// OMPI_COMM_WORLD_SIZE, or PMIx/PMI variables, are set), otherwise a single-rank group, so the
// binary runs without mpirun and never starts an MPI runtime it does not need.
// The MPI library is initialised on first use and finalised at process exit.
// Throws memtrain::RuntimeError when MPI initialisation fails or grants a thread level below
// MPI_THREAD_SERIALIZED (Note [MPI thread level]).
std::unique_ptr<Communicator> make_world_communicator();

// True when this process was started by an MPI launcher (see make_world_communicator):
// comms/launcher_environment.hpp's launched_by_mpi_launcher on this process's environment.
bool launched_by_mpi();

// This process's rank in the launcher's world, read from the launcher's environment
// (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK) without touching MPI; 0 when not launched by
// one. Error messages name it (memtrain[rank 3]: ...).
int launcher_rank();

// Note [One rank's failure ends the job]
// A rank that leaves with an error while the others wait in a collective would leave them
// waiting forever: MPI has no timeout on MPI_Allreduce. So a process that is one of several
// ranks of an initialised MPI world ends the whole job with MPI_Abort, after its error message
// is printed, as a Megatron-LM or DeepSpeed job dies when one of its ranks dies. mpirun then
// kills the other ranks and exits non-zero (Open MPI passes `exit_code` on).
//
// Ends every rank of the job with `exit_code` (MPI_Abort on MPI_COMM_WORLD) when this process
// is one of several ranks of an initialised, not yet finalised MPI world; flushes stdout and
// stderr first. Returns (doing nothing) in a single process or before MPI is initialised.
void abort_job_if_multi_rank(int exit_code);

}  // namespace memtrain::comms
