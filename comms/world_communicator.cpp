#include <cstdlib>

#include "comms/communicator.hpp"
#include "comms/mpi_communicator.hpp"
#include "comms/single_rank_communicator.hpp"

namespace memtrain::comms {

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return false;
}

std::unique_ptr<Communicator> make_world_communicator() {
  // Note [No MPI without mpirun]
  // Open MPI's singleton init (MPI_Init outside mpirun) forks a helper daemon and, as root,
  // may refuse to start; a plain `memtrain train` must not depend on that. A launcher always
  // exports its rank variables, so their absence means "one process".
  if (launched_by_mpi()) return std::make_unique<MpiCommunicator>();
  return std::make_unique<SingleRankCommunicator>();
}

}  // namespace memtrain::comms
