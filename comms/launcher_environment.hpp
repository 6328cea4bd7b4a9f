#pragma once
// What an MPI launcher tells each process it starts, read from the environment without
// initialising MPI: Open MPI's mpirun (OMPI_COMM_WORLD_*, PMIX_RANK, OMPI_APP_CTX_NUM_PROCS),
// MPICH's hydra and srun with PMI (PMI_RANK, PMI_SIZE). Header-only, with the environment
// passed in, so that tests hold every rule to made-up environments; memtrain itself passes
// std::getenv (process_environment).
#include <cstdlib>
#include <functional>
#include <sstream>

namespace memtrain::comms {

// env(name): the value of `name`, nullptr when unset.
using EnvLookup = std::function<const char*(const char*)>;

inline const char* process_environment(const char* name) { return std::getenv(name); }

// True when a launcher started this process: one of OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_SIZE
// or PMI_RANK is set (Note [No MPI without mpirun], world_communicator.cpp).
inline bool launched_by_mpi_launcher(const EnvLookup& env) {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"}) {
    if (env(var) != nullptr) return true;
  }
  return false;
}

// The launcher's world size (OMPI_COMM_WORLD_SIZE, else PMI_SIZE); 0 when neither says one
// (PMIx alone, an empty or non-numeric value).
inline int launcher_world_size(const EnvLookup& env) {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (const char* v = env(var); v != nullptr) {
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      return end != v && *end == '\0' && n > 0 && n < (1L << 30) ? static_cast<int>(n) : 0;
    }
  }
  return 0;
}

// This process's rank in the launcher's world (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK);
// 0 when not launched by one.
inline int launcher_rank(const EnvLookup& env) {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    if (const char* v = env(var); v != nullptr && *v != '\0') return std::atoi(v);
  }
  return 0;
}

// True when this process is the lowest rank of its program: rank 0 of a plain launch, or the
// first rank of each program of an MPMD launch (`mpirun -n 1 a : -n 2 b` starts ranks 0 and
// 1), which Open MPI gives as the programs' sizes in OMPI_APP_CTX_NUM_PROCS ("1 2"). One
// message per program then comes from its first rank, not from every rank.
inline bool first_rank_of_its_program(const EnvLookup& env) {
  const int rank = launcher_rank(env);
  const char* sizes = env("OMPI_APP_CTX_NUM_PROCS");
  if (sizes == nullptr) return rank == 0;
  std::istringstream in(sizes);
  long first = 0, n = 0;
  while (in >> n) {
    if (rank == first) return true;
    first += n;
  }
  return rank == 0;
}

}  // namespace memtrain::comms
