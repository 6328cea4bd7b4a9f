#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "comms/communicator.hpp"
#include "comms/launcher_environment.hpp"
#include "comms/mpi_communicator.hpp"
#include "comms/single_rank_communicator.hpp"

namespace memtrain::comms {

bool launched_by_mpi() { return launched_by_mpi_launcher(process_environment); }

int launcher_rank() { return launcher_rank(process_environment); }

std::unique_ptr<Communicator> make_world_communicator() {
  // Note [No MPI without mpirun]
  // Open MPI's singleton init (MPI_Init outside mpirun) forks a helper daemon and, as root,
  // may refuse to start; a plain `memtrain train` must not depend on that. A launcher always
  // exports its rank variables, so their absence means "one process".
  if (launched_by_mpi()) return std::make_unique<MpiCommunicator>();
  return std::make_unique<SingleRankCommunicator>();
}

void abort_job_if_multi_rank(int exit_code) {
  if (!launched_by_mpi()) return;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size <= 1) return;
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
}

}  // namespace memtrain::comms
