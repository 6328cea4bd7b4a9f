// The OMP_WAIT_POLICY memtrain starts with (Note [When OpenMP threads may spin]): every case
// of the rule in runtime/cli/omp_wait_policy.hpp, on made-up environments.
#include "runtime/cli/omp_wait_policy.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace memtrain::cli {
namespace {

std::string policy(const std::map<std::string, std::string>& environment) {
  const char* p = default_omp_wait_policy([&](const char* name) -> const char* {
    const auto it = environment.find(name);
    return it == environment.end() ? nullptr : it->second.c_str();
  });
  return p == nullptr ? "(unchanged)" : p;
}

TEST(OmpWaitPolicy, ASingleProcessKeepsLibgompsDefault) {
  EXPECT_EQ(policy({}), "(unchanged)");  // no launcher
  EXPECT_EQ(policy({{"OMPI_COMM_WORLD_SIZE", "1"}, {"OMPI_COMM_WORLD_RANK", "0"}}), "(unchanged)");
  EXPECT_EQ(policy({{"PMI_SIZE", "1"}, {"PMI_RANK", "0"}}), "(unchanged)");
}

TEST(OmpWaitPolicy, AJobOfSeveralRanksSleepsAtOnce) {
  EXPECT_EQ(policy({{"OMPI_COMM_WORLD_SIZE", "2"}}), "PASSIVE");
  EXPECT_EQ(policy({{"OMPI_COMM_WORLD_SIZE", "64"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}}), "PASSIVE");
  EXPECT_EQ(policy({{"PMI_SIZE", "4"}}), "PASSIVE");  // MPICH's hydra, srun with PMI
}

TEST(OmpWaitPolicy, ALaunchWhoseSizeIsUnknownSleepsAtOnce) {
  EXPECT_EQ(policy({{"PMIX_RANK", "0"}}), "PASSIVE");
  EXPECT_EQ(policy({{"OMPI_COMM_WORLD_SIZE", ""}}), "PASSIVE");
  EXPECT_EQ(policy({{"OMPI_COMM_WORLD_SIZE", "many"}}), "PASSIVE");
}

TEST(OmpWaitPolicy, TheUsersPolicyIsAlwaysKept) {
  EXPECT_EQ(policy({{"OMP_WAIT_POLICY", "ACTIVE"}, {"OMPI_COMM_WORLD_SIZE", "4"}}), "(unchanged)");
  EXPECT_EQ(policy({{"OMP_WAIT_POLICY", "PASSIVE"}}), "(unchanged)");
  EXPECT_EQ(policy({{"OMP_WAIT_POLICY", ""}, {"PMIX_RANK", "3"}}), "(unchanged)");  // set, even if empty
}

}  // namespace
}  // namespace memtrain::cli
