#pragma once
// The OMP_WAIT_POLICY memtrain starts with (Note [When OpenMP threads may spin],
// process_environment.cpp). Header-only so that the tests can hold the policy to its cases.
#include <cstdlib>

namespace memtrain::cli {

// The value to set OMP_WAIT_POLICY to, or nullptr to leave the environment as it is.
// user_policy: the environment's OMP_WAIT_POLICY (nullptr when unset), always respected.
// local_size: Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE (nullptr outside mpirun), the ranks on
// this node. Several ranks on a node get "PASSIVE"; a process alone on its node keeps
// libgomp's default (spin a while, then sleep). A local size that is not a number counts as 1.
inline const char* default_omp_wait_policy(const char* user_policy, const char* local_size) {
  if (user_policy != nullptr) return nullptr;
  if (local_size == nullptr) return nullptr;
  return std::strtol(local_size, nullptr, 10) > 1 ? "PASSIVE" : nullptr;
}

}  // namespace memtrain::cli
