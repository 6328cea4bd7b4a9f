// Issue 3's cases about virtual memory (4, 5, 7), checked against the
// virtual-memory upstream's own record of what was mapped, unmapped and
// released (the simulated VMM's call logs, the host VMM's counts of chunks,
// mappings and reservations), and stitching on real memory (host_vm): the bytes
// of every block survive being stitched, unstitched and mapped again.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "memory/out_of_memory.hpp"
#include "tests/memory/allocator_cases.hpp"

namespace memtrain::memory {
namespace {

using namespace memtrain::memory::testing;

// Case 5: a fault injected on the third page of a five-page map. The helper
// unmaps exactly the two pages it mapped and releases all five chunks, each
// once.
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
  EXPECT_EQ(released, (std::vector<PhysicalHandle>{handles[0], handles[1], handles[2], handles[3], handles[4]}));
  EXPECT_EQ(vmm.live_chunks(), 0u);
  EXPECT_EQ(vmm.physical_bytes(), 0u);
  EXPECT_EQ(vmm.mapped_bytes(), 0u);
  vmm.release(range);  // throws if a page were still mapped
}

// Case 5 through the allocator: the failed segment is cleaned up, the retry
// maps five fresh pages, and the device ends with exactly the five pages of the
// block.
TEST(MapFreshPages, AllocatorRetriesAfterFaultWithoutLeaking) {
  Harness h = make_harness({"vmm_stitch", Upstream::simulated_vm}, 64 * MiB);
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

// Case 7: a free hole between two live blocks inside a virtual-memory segment
// is non-releasable (inactive split) memory, and empty_cache keeps it.
class VirtualSegmentHole : public ::testing::TestWithParam<AllocatorCase> {};

TEST_P(VirtualSegmentHole, CountsAsInactiveSplit) {
  Harness h = make_harness(GetParam(), GiB);
  // Without expandable segments the three blocks come from one 60 MiB segment
  // cached earlier.
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
  EXPECT_EQ(h.upstream_used(), 0);
  EXPECT_EQ(h.upstream_mapped(), 0);
}

INSTANTIATE_TEST_SUITE_P(Policies, VirtualSegmentHole, ::testing::ValuesIn(virtual_memory_allocator_cases()),
                         CaseName());

// Case 4: every option on (split limit, collection threshold, expandable
// segments) at 95% full, then a request larger than any free block: no
// assertion, no crash, the allocator stays consistent, and at the end every
// page that was mapped is unmapped and every chunk released through the
// virtual-memory calls (a plain free of a mapped segment would throw in the
// simulated VMM).
class AllOptionsNearlyFull : public ::testing::TestWithParam<AllocatorCase> {};

TEST_P(AllOptionsNearlyFull, LargerThanAnyFreeBlockFailsCleanlyOrStitches) {
  AllocatorOptions options;
  options.max_split_size = 64 * MiB;
  options.garbage_collection_threshold = 0.8;
  Harness h = make_harness(GetParam(), GiB, options);
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
  if (GetParam().policy == "vmm_stitch") {
    EXPECT_NE(big.ptr, nullptr) << "a third of 950 MiB is free in page-sized holes";
  } else {
    EXPECT_EQ(big.ptr, nullptr) << "only stitching can use the scattered holes";
  }
  EXPECT_EQ(h.allocator->stats().reserved_bytes.current, h.upstream_used());
  EXPECT_GE(h.allocator->stats().num_ooms + (big.ptr ? 1 : 0), 1);
  h.allocator->deallocate(big);
  for (const Block& b : live) h.allocator->deallocate(b);
  h.allocator->empty_cache();
  EXPECT_EQ(h.upstream_mapped(), 0);
  EXPECT_EQ(h.upstream_live_chunks(), 0);
  EXPECT_EQ(h.upstream_live_reservations(), 0);
  EXPECT_EQ(h.allocator->stats().reserved_bytes.current, 0);
  if (!h.vmm) return;  // the call logs below are the simulated VMM's
  const auto counters = h.vmm->counters();
  EXPECT_EQ(counters.create_calls, counters.release_physical_calls);
  std::vector<std::uintptr_t> mapped = h.vmm->mapped_log();
  std::vector<std::uintptr_t> unmapped = h.vmm->unmapped_log();
  std::sort(mapped.begin(), mapped.end());
  std::sort(unmapped.begin(), unmapped.end());
  EXPECT_EQ(mapped, unmapped);
}

std::vector<AllocatorCase> expandable_cases_that_split() {
  std::vector<AllocatorCase> out;
  for (const AllocatorCase& c : virtual_memory_allocator_cases()) {
    if (c.expandable) out.push_back(c);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Policies, AllOptionsNearlyFull, ::testing::ValuesIn(expandable_cases_that_split()),
                         CaseName());

// Stitching on real memory (host_vm, memfd chunks; the simulated VMM has no
// bytes, so it is not a case here). Sixteen 2 MiB blocks carved from one cached
// 32 MiB segment, every other one freed: a 12 MiB request has no single free
// block and is stitched from six of the eight holes. Every block holds a
// pattern derived from its id; the test checks that
//  - the stitched block holds what is written through it while the live blocks
//  around its pages
//    keep theirs (its pages are the holes' pages, not the neighbours');
//  - nothing physical was added for it (only mappings);
//  - live blocks freed and reallocated beside it never reach its bytes, nor it
//  theirs;
//  - once freed, its pages serve new blocks again and nobody's bytes change;
//  - a request larger than every free page together is stitched from free plus
//  fresh pages.
class StitchingOnRealMemory : public ::testing::TestWithParam<AllocatorCase> {};

TEST_P(StitchingOnRealMemory, BlocksKeepTheirBytesThroughStitchAndUnstitch) {
  Harness h = make_harness(GetParam(), 48 * MiB);
  std::map<std::uint64_t, Block> live;  // id -> block
  std::uint64_t next_id = 1;
  auto take = [&](std::size_t bytes) {
    Block b = h.allocator->allocate(bytes);
    fill_pattern(b.ptr, b.size, next_id);
    live.emplace(next_id, b);
    return next_id++;
  };
  auto give_back = [&](std::uint64_t id) {
    h.allocator->deallocate(live.at(id));
    live.erase(id);
  };
  auto expect_all_intact = [&](const char* when) {
    for (const auto& [id, b] : live) {
      EXPECT_EQ(first_pattern_mismatch(b.ptr, b.size, id), -1) << "block " << id << " " << when;
    }
  };
  auto stitched_segments = [&] {
    std::size_t n = 0;
    for (const SegmentSnapshot& seg : h.allocator->snapshot()) n += seg.is_stitched;
    return n;
  };
  if (!GetParam().expandable) h.allocator->deallocate(h.allocator->allocate(32 * MiB));
  std::vector<std::uint64_t> small;
  for (int i = 0; i < 16; ++i) small.push_back(take(2 * MiB));
  for (int i = 0; i < 16; i += 2) give_back(small[i]);
  const long long physical = h.upstream_used();
  const long long mapped = h.upstream_mapped();
  ASSERT_EQ(stitched_segments(), 0u);

  const std::uint64_t big = take(12 * MiB);
  ASSERT_EQ(stitched_segments(), 1u) << "12 MiB from 2 MiB holes must be stitched";
  EXPECT_EQ(h.upstream_used(), physical) << "stitching adds no physical memory";
  EXPECT_EQ(h.upstream_mapped(), mapped + static_cast<long long>(12 * MiB));
  expect_all_intact("after stitching");

  // Churn beside the stitched block: free two live neighbours, take their space
  // again.
  give_back(small[1]);
  give_back(small[5]);
  take(2 * MiB);
  take(MiB + 3);
  take(300);
  expect_all_intact("after reusing the neighbours' space");

  // Unstitch: the pages go back to their segments and serve new blocks.
  const long long mapped_with_big = h.upstream_mapped();
  give_back(big);
  EXPECT_EQ(stitched_segments(), 0u);
  EXPECT_EQ(h.upstream_mapped(), mapped_with_big - static_cast<long long>(12 * MiB))
      << "the stitched range is unmapped";
  for (int i = 0; i < 4; ++i) take(2 * MiB);
  expect_all_intact("after the stitched pages were reused");

  // More than all free pages together, on a device too full for a new 20 MiB
  // segment (34 of 48 MiB reserved): stitched from the 8 MiB still free plus
  // fresh pages.
  const long long physical_before = h.upstream_used();
  const std::uint64_t bigger = take(20 * MiB);
  EXPECT_EQ(stitched_segments(), 1u);
  EXPECT_GT(h.upstream_used(), physical_before);
  EXPECT_LT(h.upstream_used(), physical_before + static_cast<long long>(20 * MiB));
  expect_all_intact("after stitching with fresh pages");
  give_back(bigger);
  expect_all_intact("after freeing the second stitched block");

  while (!live.empty()) give_back(live.begin()->first);
  h.allocator->empty_cache();
  EXPECT_EQ(h.upstream_used(), 0);
  EXPECT_EQ(h.upstream_mapped(), 0);
  EXPECT_EQ(h.upstream_live_reservations(), 0);
}

INSTANTIATE_TEST_SUITE_P(Policies, StitchingOnRealMemory,
                         ::testing::Values(AllocatorCase{"vmm_stitch", Upstream::host_vm},
                                           AllocatorCase{"vmm_stitch", Upstream::host_vm, true}),
                         CaseName());

}  // namespace
}  // namespace memtrain::memory
