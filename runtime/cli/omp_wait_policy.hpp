#pragma once
// The OMP_WAIT_POLICY memtrain starts with (Note [When OpenMP threads may spin],
// process_environment.cpp). Header-only so that the tests can hold the policy to its cases.
#include "comms/launcher_environment.hpp"

namespace memtrain::cli {

// The value to set OMP_WAIT_POLICY to, or nullptr to leave the environment as it is.
// env(name) is the environment's value of `name`, nullptr when unset (std::getenv in memtrain).
// A user's OMP_WAIT_POLICY is always kept. A single process keeps libgomp's default (spin a
// while, then sleep): one not started by an MPI launcher (none of the variables that
// comms/launcher_environment.hpp's launched_by_mpi_launcher reads), or a world of one rank
// (launcher_world_size 1: OMPI_COMM_WORLD_SIZE, else PMI_SIZE). Every other launch gets "PASSIVE",
// including one whose world size the launcher does not say.
inline const char* default_omp_wait_policy(const comms::EnvLookup& env) {
  if (env("OMP_WAIT_POLICY") != nullptr) return nullptr;
  if (!comms::launched_by_mpi_launcher(env)) return nullptr;
  return comms::launcher_world_size(env) == 1 ? nullptr : "PASSIVE";
}

}  // namespace memtrain::cli
