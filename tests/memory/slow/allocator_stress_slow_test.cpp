// The heavy stress/property test: eight jobs as threads, ten thousand operations each, on one
// simulated 16 GiB device, for two seeds and every policy (stress_harness.hpp).
#include <gtest/gtest.h>

#include "tests/memory/ledger_test_util.hpp"
#include "tests/memory/stress_harness.hpp"

namespace memtrain::memory::stress {
namespace {

class HeavyStressEveryPolicy : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(HeavyStressEveryPolicy, InvariantsHoldAfterEveryOperation) {
  testing::ScopedDevice dev;
  StressConfig cfg;
  cfg.policy = std::get<0>(GetParam());
  cfg.seed = static_cast<std::uint64_t>(std::get<1>(GetParam()));
  cfg.capacity_bytes = 16 * GiB;
  cfg.quotas = true;
  cfg.ledger_device = dev.name;
  cfg.jobs = {{1 * GiB, 4 * GiB}, {512 * MiB, 2 * GiB}, {0, 3 * GiB},         {2 * GiB, kNoLimit},
              {0, kNoLimit},      {3 * GiB, 6 * GiB},   {256 * MiB, 1 * GiB}, {0, 8 * GiB}};
  cfg.ops_per_job = 10000;
  StressResult r = run_stress(cfg);
  for (const auto& v : r.violations) ADD_FAILURE() << v;
  EXPECT_EQ(r.operations, 80000u);
  EXPECT_GT(r.ooms, 0u);
}

INSTANTIATE_TEST_SUITE_P(PoliciesAndSeeds, HeavyStressEveryPolicy,
                         ::testing::Combine(::testing::Values("no_cache", "pytorch", "best_fit", "vmm_stitch"),
                                            ::testing::Values(1, 2)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_seed" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace memtrain::memory::stress
