// The stress/property test, unit size (seconds, also under ASan + UBSan): five
// jobs as threads on one simulated 8 GiB device, each a thousand heavy-tailed
// allocations and frees, every invariant of stress_harness.hpp checked after
// every operation. The heavy variant is in slow/allocator_stress_slow_test.cpp.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "tests/memory/ledger_test_util.hpp"
#include "tests/memory/stress_harness.hpp"

namespace memtrain::memory::stress {
namespace {

class StressEveryPolicy : public ::testing::TestWithParam<const char*> {};

// Every policy runs behind quotas on one shared ledger (vmm_stitch through
// QuotaVirtualMemoryResource).
TEST_P(StressEveryPolicy, InvariantsHoldAfterEveryOperation) {
  testing::ScopedDevice dev;
  StressConfig cfg;
  cfg.policy = GetParam();
  cfg.capacity_bytes = 8 * GiB;
  cfg.quotas = true;
  cfg.ledger_device = dev.name;
  // The last job's 1 GiB limit makes it refuse itself often, whatever the other
  // threads do, so the out-of-memory path is always exercised.
  cfg.jobs = {{1 * GiB, 4 * GiB}, {512 * MiB, 2 * GiB}, {0, 3 * GiB}, {2 * GiB, kNoLimit}, {256 * MiB, 1 * GiB}};
  cfg.ops_per_job = 1000;
  cfg.seed = 42;
  StressResult r = run_stress(cfg);
  for (const auto& v : r.violations) ADD_FAILURE() << v;
  std::printf(
      "%s: %zu operations, %zu allocations, %zu out-of-memory, at most "
      "%zu live blocks per job\n",
      cfg.policy.c_str(), r.operations, r.allocations, r.ooms, r.max_live_blocks);
  EXPECT_EQ(r.operations, 5000u);
  // The run must have exercised what it checks: many allocations, and the OOM
  // path.
  EXPECT_GT(r.allocations, 1000u);
  EXPECT_GT(r.ooms, 0u);
}

INSTANTIATE_TEST_SUITE_P(Policies, StressEveryPolicy,
                         ::testing::Values("no_cache", "pytorch", "best_fit", "vmm_stitch"),
                         [](const auto& info) { return std::string(info.param); });

TEST(StressSizes, AreHeavyTailedBetween256BytesAnd1GiB) {
  StressConfig cfg;
  std::mt19937_64 rng(3);
  std::size_t n = 200000, above_1mib = 0, at_cap = 0, lo = SIZE_MAX, hi = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t b = draw_size(rng, cfg);
    lo = std::min(lo, b);
    hi = std::max(hi, b);
    above_1mib += b > MiB;
    at_cap += b == GiB;
  }
  EXPECT_GE(lo, 256u);
  EXPECT_EQ(hi, GiB);
  // Pareto(256 B, 0.3): P(size > 1 MiB) = (2^8 / 2^20)^0.3 = 2^-3.6 = 0.0825;
  // P(size >= 1 GiB) = 2^-6.6 = 0.0103.
  EXPECT_NEAR(static_cast<double>(above_1mib) / n, 0.0825, 0.005);
  EXPECT_NEAR(static_cast<double>(at_cap) / n, 0.0103, 0.002);
}

}  // namespace
}  // namespace memtrain::memory::stress
