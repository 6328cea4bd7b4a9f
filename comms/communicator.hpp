#pragma once
// A process group for collective operations on host buffers. comms/ sees buffers, not models
// (design.md): gradient synchronisation and, later, compression sit on top of this interface.
#include <cstdint>
#include <memory>
#include <string>

namespace memtrain::comms {

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
  // Copies `bytes` bytes from `root` to every rank (MPI_Bcast).
  virtual void broadcast(void* data, std::int64_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // Human-readable backend name ("single", "mpi").
  virtual std::string backend() const = 0;
};

// The world group of this process: MPI when launched by mpirun (Open MPI's
// OMPI_COMM_WORLD_SIZE, or PMIx/PMI variables, are set), otherwise a single-rank group, so the
// binary runs without mpirun and never starts an MPI runtime it does not need.
// The MPI library is initialised on first use and finalised at process exit.
// Throws memtrain::RuntimeError when MPI initialisation fails.
std::unique_ptr<Communicator> make_world_communicator();

// True when this process was started by an MPI launcher (see make_world_communicator).
bool launched_by_mpi();

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
