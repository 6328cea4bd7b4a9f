// Issue 3's cases about virtual memory (4, 5, 7), checked against the simulated VMM's own record
// of what was mapped, unmapped and released.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "memory/out_of_memory.hpp"
#include "tests/memory/allocator_cases.hpp"

namespace memtrain::memory {
namespace {

using namespace memtrain::memory::testing;

// Case 5: a fault injected on the third page of a five-page map. The helper unmaps exactly the
// two pages it mapped and releases all five chunks, each once.
TEST(MapFreshPages, FaultOnThirdPageUnmapsTwoAndReleasesFiveOnce) {
  SimulatedVirtualMemoryResource vmm(64 * MiB);
  const VirtualRange range = vmm.reserve(10 * MiB);
  vmm.inject_map_failure(3);
  PhysicalHandle handles[5] = {};
  EXPECT_THROW(map_fresh_pages(vmm, range, handles), VirtualMemoryError);
  const std::vector<std::uintptr_t> expected_pages = {range.address, range.address + 2 * MiB};
  EXPECT_EQ(vmm.mapped_log(), expected_pages);
  std::vector<std::uintptr_t> unmapped = vmm.unmapped_log();
  std::sort(unmapped.begin(), unmapped.end());
  EXPECT_EQ(unmapped, expected_pages);
  std::vector<PhysicalHandle> released = vmm.released_physical_log();
  std::sort(released.begin(), released.end());
  EXPECT_EQ(released, (std::vector<PhysicalHandle>{handles[0], handles[1], handles[2], handles[3],
                                                    handles[4]}));
  EXPECT_EQ(vmm.live_chunks(), 0u);
  EXPECT_EQ(vmm.physical_bytes(), 0u);
  EXPECT_EQ(vmm.mapped_bytes(), 0u);
  vmm.release(range);  // throws if a page were still mapped
}

// Case 5 through the allocator: the failed segment is cleaned up, the retry maps five fresh
// pages, and the device ends with exactly the five pages of the block.
TEST(MapFreshPages, AllocatorRetriesAfterFaultWithoutLeaking) {
  Harness h = make_harness({"vmm_stitch", Upstream::simulated_vmm}, 64 * MiB);
  h.vmm->inject_map_failure(3);
  Block b = h.allocator->allocate(10 * MiB);
  EXPECT_NE(b.ptr, nullptr);
  const auto counters = h.vmm->counters();
  EXPECT_EQ(counters.failed_map_calls, 1u);
  EXPECT_EQ(counters.unmap_calls, 2u);
  EXPECT_EQ(counters.release_physical_calls, 5u);
  EXPECT_EQ(counters.map_calls, 2u + 5u);
  EXPECT_EQ(h.vmm->live_chunks(), 5u);
  EXPECT_EQ(h.vmm->live_reservations(), 1u);
  EXPECT_EQ(h.allocator->stats().num_alloc_retries, 1);
  EXPECT_EQ(h.allocator->stats().reserved_bytes.current, static_cast<std::int64_t>(10 * MiB));
  h.allocator->deallocate(b);
  h.allocator->empty_cache();
  EXPECT_EQ(h.vmm->live_chunks(), 0u);
  EXPECT_EQ(h.vmm->live_reservations(), 0u);
}

// Case 7: a free hole between two live blocks inside a virtual-memory segment is non-releasable
// (inactive split) memory, and empty_cache keeps it.
class VirtualSegmentHole : public ::testing::TestWithParam<AllocatorCase> {};

TEST_P(VirtualSegmentHole, CountsAsInactiveSplit) {
  Harness h = make_harness(GetParam(), GiB);
  // Without expandable segments the three blocks come from one 60 MiB segment cached earlier.
  if (!GetParam().expandable) h.allocator->deallocate(h.allocator->allocate(60 * MiB));
  Block a = h.allocator->allocate(20 * MiB);
  Block hole = h.allocator->allocate(20 * MiB);
  Block c = h.allocator->allocate(20 * MiB);
  ASSERT_EQ(static_cast<char*>(hole.ptr) - static_cast<char*>(a.ptr), static_cast<long>(20 * MiB));
  ASSERT_EQ(static_cast<char*>(c.ptr) - static_cast<char*>(hole.ptr), static_cast<long>(20 * MiB));
  h.allocator->deallocate(hole);
  EXPECT_EQ(h.allocator->stats().inactive_split_bytes.current, static_cast<std::int64_t>(20 * MiB));
  const auto reserved = h.allocator->stats().reserved_bytes.current;
  h.allocator->empty_cache();
  EXPECT_EQ(h.allocator->stats().reserved_bytes.current, reserved);
  EXPECT_EQ(h.allocator->stats().inactive_split_bytes.current, static_cast<std::int64_t>(20 * MiB));
  h.allocator->deallocate(a);
  h.allocator->deallocate(c);
  EXPECT_EQ(h.allocator->stats().inactive_split_bytes.current, 0);
  h.allocator->empty_cache();
  EXPECT_EQ(h.vmm->physical_bytes(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Policies, VirtualSegmentHole,
                         ::testing::Values(AllocatorCase{"vmm_stitch", Upstream::simulated_vmm},
                                           AllocatorCase{"vmm_stitch", Upstream::simulated_vmm, true},
                                           AllocatorCase{"best_fit", Upstream::simulated_vmm, true},
                                           AllocatorCase{"pytorch", Upstream::simulated_vmm, true}),
                         [](const auto& info) { return case_name(info.param); });

// Case 4: every option on (split limit, collection threshold, expandable segments) at 95% full,
// then a request larger than any free block: no assertion, no crash, the allocator stays
// consistent, and at the end every page that was mapped is unmapped and every chunk released
// through the virtual-memory calls (a plain free of a mapped segment would throw in the
// simulated VMM).
class AllOptionsNearlyFull : public ::testing::TestWithParam<std::string> {};

TEST_P(AllOptionsNearlyFull, LargerThanAnyFreeBlockFailsCleanlyOrStitches) {
  AllocatorOptions options;
  options.max_split_size = 64 * MiB;
  options.garbage_collection_threshold = 0.8;
  Harness h = make_harness({GetParam(), Upstream::simulated_vmm, true}, GiB, options);
  std::mt19937_64 rng(3);
  std::vector<Block> live;
  std::size_t allocated = 0;
  while (allocated < GiB * 95 / 100) {
    const std::size_t bytes = std::min<std::size_t>((1 + rng() % 24) * MiB, GiB * 95 / 100 - allocated);
    try {
      live.push_back(h.allocator->allocate(bytes));
      allocated += bytes;
    } catch (const OutOfMemory&) {
      break;
    }
  }
  // Free every third block: holes of a few MiB each, none of 100 MiB.
  for (std::size_t i = 0; i < live.size(); i += 3) {
    h.allocator->deallocate(live[i]);
    live[i] = Block{};
  }
  Block big;
  try {
    big = h.allocator->allocate(100 * MiB);
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("tried to allocate 100.00 MiB"), std::string::npos);
  }
  if (GetParam() == "vmm_stitch") {
    EXPECT_NE(big.ptr, nullptr) << "a third of 950 MiB is free in page-sized holes";
  } else {
    EXPECT_EQ(big.ptr, nullptr) << "only stitching can use the scattered holes";
  }
  EXPECT_EQ(h.allocator->stats().reserved_bytes.current,
            static_cast<std::int64_t>(h.vmm->physical_bytes()));
  EXPECT_GE(h.allocator->stats().num_ooms + (big.ptr ? 1 : 0), 1);
  h.allocator->deallocate(big);
  for (const Block& b : live) h.allocator->deallocate(b);
  h.allocator->empty_cache();
  EXPECT_EQ(h.vmm->mapped_bytes(), 0u);
  EXPECT_EQ(h.vmm->live_chunks(), 0u);
  EXPECT_EQ(h.vmm->live_reservations(), 0u);
  const auto counters = h.vmm->counters();
  EXPECT_EQ(counters.create_calls, counters.release_physical_calls);
  std::vector<std::uintptr_t> mapped = h.vmm->mapped_log();
  std::vector<std::uintptr_t> unmapped = h.vmm->unmapped_log();
  std::sort(mapped.begin(), mapped.end());
  std::sort(unmapped.begin(), unmapped.end());
  EXPECT_EQ(mapped, unmapped);
  EXPECT_EQ(h.allocator->stats().reserved_bytes.current, 0);
}

INSTANTIATE_TEST_SUITE_P(Policies, AllOptionsNearlyFull,
                         ::testing::Values("pytorch", "best_fit", "vmm_stitch"));

}  // namespace
}  // namespace memtrain::memory
