// Fragmentation (now and at peak reserved), utilization and per-tag counters, against values
// worked out by hand for a small scenario on best_fit (sizes in MiB, all multiples of 2 MiB so
// no rounding is involved).
#include <gtest/gtest.h>

#include "tests/memory/allocator_cases.hpp"

namespace memtrain::memory {
namespace {

using namespace memtrain::memory::testing;

TEST(MemoryStatsValues, FragmentationNowAndAtPeakAndUtilization) {
  Harness h = make_harness({"best_fit", Upstream::simulated}, GiB);
  CachingAllocator& a = *h.allocator;
  a.deallocate(a.allocate(100 * MiB));                // one cached 100 MiB segment
  Block x = a.allocate(30 * MiB, kDefaultStream, 1);  // [30 x][70 free]
  Block y = a.allocate(40 * MiB, kDefaultStream, 2);  // [30 x][40 y][30 free]
  a.deallocate(x);                                    // [30 free][40 y][30 free]
  MemoryStats s = a.stats();
  EXPECT_DOUBLE_EQ(s.fragmentation, 1.0 - 30.0 / 60.0);
  EXPECT_EQ(s.inactive_split_bytes.current, static_cast<std::int64_t>(60 * MiB));
  Block z = a.allocate(200 * MiB, kDefaultStream, 1);  // new segment: reserved peaks at 300 MiB
  a.deallocate(z);                                     // 200 MiB cached whole
  s = a.stats();
  EXPECT_DOUBLE_EQ(s.fragmentation_at_peak_reserved, 0.5) << "holes 30 + 30, largest 30";
  EXPECT_DOUBLE_EQ(s.fragmentation, 1.0 - 200.0 / 260.0);
  EXPECT_EQ(s.reserved_bytes.peak, static_cast<std::int64_t>(300 * MiB));
  EXPECT_EQ(s.allocated_bytes.peak, static_cast<std::int64_t>(240 * MiB));  // y + z
  EXPECT_DOUBLE_EQ(s.utilization, 240.0 / 300.0);
  // Per tag: tag 1 held 30 then 200 (never together), tag 2 holds 40.
  EXPECT_EQ(s.per_tag.at(1).allocated_bytes.peak, static_cast<std::int64_t>(200 * MiB));
  EXPECT_EQ(s.per_tag.at(1).allocated_bytes.current, 0);
  EXPECT_EQ(s.per_tag.at(2).allocated_bytes.current, static_cast<std::int64_t>(40 * MiB));
  EXPECT_EQ(s.per_tag.at(2).requested_bytes.current, static_cast<std::int64_t>(40 * MiB));
  EXPECT_EQ(s.num_device_alloc, 2);
  a.deallocate(y);
  EXPECT_DOUBLE_EQ(a.stats().fragmentation, 1.0 - 200.0 / 300.0);
}

TEST(MemoryStatsValues, RequestedBytesKeepTheCallersSizes) {
  Harness h = make_harness({"pytorch", Upstream::simulated}, GiB);
  Block a = h.allocator->allocate(1000);  // rounded to 1024
  Block b = h.allocator->allocate(1);     // rounded to 512
  const MemoryStats s = h.allocator->stats();
  EXPECT_EQ(s.requested_bytes.current, 1001);
  EXPECT_EQ(s.allocated_bytes.current, 1536);
  h.allocator->deallocate(a);
  h.allocator->deallocate(b);
  EXPECT_EQ(h.allocator->stats().requested_bytes.freed, 1001);
}

}  // namespace
}  // namespace memtrain::memory
