// The pool a job admitted by plan waits in and its need there (runtime/train/pool_device.hpp):
// on the host memory.ledger, nothing outside the allocator and one share per local rank; on a
// GPU the context and workspaces are added to every process's planned peak, and a GPU job of
// several ranks is refused (Note [A GPU is a pool of its own]). The GPU's own figures need a
// driver; the closed form of the need is checked here over a PoolDevice that stands for one.
#include <gtest/gtest.h>

#include "runtime/core/errors.hpp"
#include "runtime/train/pool_device.hpp"
#include "tests/train/tiny_config.hpp"

namespace memtrain::train {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

TEST(PoolDevice, TheHostsPoolIsMemoryLedgerWithOneSharePerLocalRank) {
  Config c = testing::tiny_mock_config();
  c.memory.ledger = "team-a";
  const PoolDevice d = pool_device(c, /*local_rank=*/1, /*local_size=*/2, /*world_size=*/2);
  EXPECT_EQ(d.ledger, "team-a");
  EXPECT_FALSE(d.gpu);
  EXPECT_EQ(d.outside_allocator_bytes(), 0u);
  EXPECT_EQ(d.processes, 2);
  // Nothing runs outside the allocator on the host: the need is the plan, once per rank, and
  // what the job holds is its allocators' segments, once per rank.
  EXPECT_EQ(pool_need_bytes(30 * MiB, d), 60 * MiB);
  EXPECT_EQ(pool_held_bytes(28 * MiB, 0, d), 56 * MiB);
}

TEST(PoolDevice, AGpuProcessNeedsItsPlanPlusTheContextAndWorkspaces) {
  PoolDevice d;
  d.ledger = "gpu-00112233-4455-6677-8899-aabbccddeeff";
  d.gpu = true;
  d.context_bytes = 640 * MiB;
  d.fixed_workspace_bytes = 41 * MiB;
  d.processes = 1;
  EXPECT_EQ(pool_need_bytes(300 * MiB, d), (300 + 640 + 41) * MiB);
  // Held at the planned peak with the fixed workspaces: the need, so the reservation neither
  // grows nor leaves room another job would be admitted into.
  EXPECT_EQ(pool_held_bytes(300 * MiB, 41 * MiB, d), pool_need_bytes(300 * MiB, d));
  // A 16-bit run's float-view scratch grows the workspaces past the fixed ones: held counts it.
  EXPECT_EQ(pool_held_bytes(300 * MiB, 45 * MiB, d), (300 + 640 + 45) * MiB);
}

TEST(PoolDevice, AGpuJobOfSeveralRanksIsRefusedWithItsReason) {
  for (const std::string device : {"cuda", "cuda:0"}) {
    Config c = testing::tiny_mock_config();
    c.device = device;
    try {
      pool_device(c, 0, 2, 2);
      FAIL() << device << ": a GPU job of 2 ranks was given a pool";
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("memory.admission = wait with device = " + device + ": this job has 2 ranks"),
                std::string::npos)
          << what;
      EXPECT_NE(what.find("expected one rank, memory.admission: fail, or device: cpu"), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace memtrain::train
