#pragma once
// The OMP_WAIT_POLICY memtrain starts with (Note [When OpenMP threads may spin],
// process_environment.cpp). Header-only so that the tests can hold the policy to its cases.
#include <cstdlib>
#include <functional>

namespace memtrain::cli {

// The value to set OMP_WAIT_POLICY to, or nullptr to leave the environment as it is.
// env(name) is the environment's value of `name`, nullptr when unset (std::getenv in memtrain).
// A user's OMP_WAIT_POLICY is always kept. A single process keeps libgomp's default (spin a
// while, then sleep): one not started by an MPI launcher (none of the variables that
// comms/world_communicator.cpp's launched_by_mpi reads), or a world of one rank
// (OMPI_COMM_WORLD_SIZE, else PMI_SIZE, equal to 1). Every other launch gets "PASSIVE",
// including one whose world size the launcher does not say.
inline const char* default_omp_wait_policy(const std::function<const char*(const char*)>& env) {
  if (env("OMP_WAIT_POLICY") != nullptr) return nullptr;
  const bool launched = env("OMPI_COMM_WORLD_SIZE") != nullptr || env("PMIX_RANK") != nullptr ||
                        env("PMI_SIZE") != nullptr;
  if (!launched) return nullptr;
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (const char* size = env(var); size != nullptr) {
      return std::strtol(size, nullptr, 10) == 1 ? nullptr : "PASSIVE";
    }
  }
  return "PASSIVE";
}

}  // namespace memtrain::cli
