// Note [Headroom over the plan] (runtime/plan/planned_need.hpp): the headroom is the segment the
// job's policy would reserve for its largest allocation. Expected sizes follow PyTorch's
// CUDACachingAllocator rules (requests up to 1 MiB share 2 MiB segments, up to 10 MiB take a
// 20 MiB one, larger ones are rounded up to 2 MiB) and best_fit's (small requests in 2 MiB
// segments, large ones rounded up to 2 MiB); and the need is the dry-run peak plus it.
#include <gtest/gtest.h>

#include "runtime/plan/plan_step.hpp"
#include "runtime/plan/planned_need.hpp"
#include "tests/train/tiny_config.hpp"

namespace memtrain::train {
namespace {

constexpr std::size_t KiB = std::size_t{1} << 10, MiB = std::size_t{1} << 20;

Config with_policy(const std::string& policy) {
  Config c = testing::tiny_mock_config();
  c.memory.policy = policy;
  return c;
}

TEST(PlannedNeed, TheHeadroomIsOneSegmentOfTheLargestAllocationUnderThePolicy) {
  const Config pytorch = with_policy("pytorch");
  EXPECT_EQ(need_headroom_bytes(pytorch, 1 * KiB), 2 * MiB);
  EXPECT_EQ(need_headroom_bytes(pytorch, 5 * MiB), 20 * MiB);
  EXPECT_EQ(need_headroom_bytes(pytorch, 15 * MiB + 1), 16 * MiB);
  const Config best_fit = with_policy("best_fit");
  EXPECT_EQ(need_headroom_bytes(best_fit, 1 * KiB), 2 * MiB);
  EXPECT_EQ(need_headroom_bytes(best_fit, 3 * MiB), 4 * MiB);
}

TEST(PlannedNeed, TheNeedIsTheDryRunPeakPlusTheHeadroom) {
  const Config c = with_policy("best_fit");
  const StepMeasurement m = measure_step(c, 1);
  std::size_t largest = 0;
  for (const auto& op : m.trace) {
    if (op.kind == memory::TraceOp::Kind::alloc) largest = std::max(largest, op.bytes);
  }
  ASSERT_GT(largest, 0u);
  EXPECT_EQ(planned_peak_reserved_bytes(c, 1),
            static_cast<std::size_t>(m.stats.reserved_bytes.peak) + need_headroom_bytes(c, largest));
}

}  // namespace
}  // namespace memtrain::train
