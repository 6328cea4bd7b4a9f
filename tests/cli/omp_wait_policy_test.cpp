// The OMP_WAIT_POLICY memtrain starts with (Note [When OpenMP threads may spin]): every case
// of the rule in runtime/cli/omp_wait_policy.hpp.
#include "runtime/cli/omp_wait_policy.hpp"

#include <gtest/gtest.h>

#include <string>

namespace memtrain::cli {
namespace {

std::string policy(const char* user, const char* local_size) {
  const char* p = default_omp_wait_policy(user, local_size);
  return p == nullptr ? "(unchanged)" : p;
}

TEST(OmpWaitPolicy, AProcessAloneOnItsNodeKeepsLibgompsDefault) {
  EXPECT_EQ(policy(nullptr, nullptr), "(unchanged)");  // not under mpirun
  EXPECT_EQ(policy(nullptr, "1"), "(unchanged)");      // one rank on this node
}

TEST(OmpWaitPolicy, SeveralRanksOnANodeSleepAtOnce) {
  EXPECT_EQ(policy(nullptr, "2"), "PASSIVE");
  EXPECT_EQ(policy(nullptr, "16"), "PASSIVE");
}

TEST(OmpWaitPolicy, TheUsersPolicyIsAlwaysKept) {
  EXPECT_EQ(policy("ACTIVE", "4"), "(unchanged)");
  EXPECT_EQ(policy("PASSIVE", nullptr), "(unchanged)");
  EXPECT_EQ(policy("", "4"), "(unchanged)");  // set, even if empty
}

TEST(OmpWaitPolicy, ALocalSizeThatIsNotANumberCountsAsOne) {
  EXPECT_EQ(policy(nullptr, ""), "(unchanged)");
  EXPECT_EQ(policy(nullptr, "many"), "(unchanged)");
}

}  // namespace
}  // namespace memtrain::cli
