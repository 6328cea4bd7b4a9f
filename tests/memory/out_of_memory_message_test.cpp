// The OutOfMemory message carries every number a user needs (style.md's wording), computed here
// by hand from the scenario, and memory_summary() shows the counters.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <string>

#include "memory/out_of_memory.hpp"
#include "memory/tag_registry.hpp"
#include "memory/trace_event.hpp"
#include "tests/memory/allocator_cases.hpp"

namespace memtrain::memory {
namespace {

using namespace memtrain::memory::testing;

std::string oom_message(CachingAllocator& a, std::size_t bytes) {
  try {
    a.allocate(bytes);
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.requested_bytes(), bytes);
    return e.what();
  }
  ADD_FAILURE() << "no OutOfMemory for " << bytes << " bytes";
  return {};
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

// 256 MiB device; a 160 MiB segment holds 100 MiB live and a 60 MiB free rest (split, so the
// retry cannot release it): a 200 MiB request fails with free = 256 - 160 = 96 MiB, reserved
// but unallocated = 60 MiB, largest free block 60 MiB. 60 + 96 < 200: no policy could serve
// it, so the hint is to free memory.
TEST(OutOfMemoryMessage, ReportsRequestCapacityFreeAllocatedReservedAndLargestBlock) {
  Harness h = make_harness({"best_fit", Upstream::simulated}, 256 * MiB);
  h.allocator->deallocate(h.allocator->allocate(160 * MiB));
  Block live = h.allocator->allocate(100 * MiB);
  std::vector<TraceEvent> events;
  h.allocator->set_event_sink([&](const TraceEvent& e) { events.push_back(e); });
  const std::string msg = oom_message(*h.allocator, 200 * MiB);
  expect_contains(msg, "out of memory on simulated test device: tried to allocate 200.00 MiB; ");
  expect_contains(msg, "capacity 256.00 MiB, 96.00 MiB free; ");
  expect_contains(msg, "100.00 MiB allocated, 60.00 MiB reserved but unallocated");
  expect_contains(msg, "(largest free block 60.00 MiB).");
  expect_contains(msg, "reduce micro_batch_size");
  EXPECT_EQ(msg.find("vmm_stitch"), std::string::npos) << "stitching would not help here";
  EXPECT_EQ(h.allocator->stats().num_ooms, 1);
  EXPECT_EQ(h.allocator->stats().reserved_bytes.current, static_cast<std::int64_t>(160 * MiB));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().kind, TraceEventKind::oom);
  EXPECT_EQ(events.back().bytes, 200 * MiB);
  h.allocator->deallocate(live);
}

// An unbounded host resource says so instead of printing a capacity.
TEST(OutOfMemoryMessage, UnboundedUpstreamSaysSo) {
  CachingAllocator a(std::make_shared<HostResource>(), AllocatorOptions{});
  const std::string msg = oom_message(a, SIZE_MAX - 4);
  expect_contains(msg, "out of memory on host: tried to allocate ");
  expect_contains(msg, "capacity unbounded");
}

TEST(MemorySummary, ShowsCountersAndTags) {
  Harness h = make_harness({"pytorch", Upstream::simulated}, GiB);
  Block a = h.allocator->allocate(40 * MiB, kDefaultStream, 0);
  const std::string summary = h.allocator->memory_summary();
  expect_contains(summary, "policy pytorch");
  expect_contains(summary, "Allocated memory");
  expect_contains(summary, "40.00 MiB");
  expect_contains(summary, "Non-releasable memory");
  expect_contains(summary, "untagged allocated");
  expect_contains(summary, "Utilization: 1.000");
  h.allocator->deallocate(a);
}

// Every table row ends at the same column, also for the longest tag name a training run
// registers ("optimizer_state").
TEST(MemorySummary, TagRowsAlignWithTheTable) {
  const TagId tag = tag_registry().register_tag("optimizer_state");
  Harness h = make_harness({"best_fit", Upstream::simulated}, GiB);
  Block a = h.allocator->allocate(3 * MiB, kDefaultStream, tag);
  std::istringstream lines(h.allocator->memory_summary());
  std::size_t width = 0;
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.size() < 2 || line.back() != '|') continue;  // title and tail lines are open
    if (width == 0) width = line.size();
    EXPECT_EQ(line.size(), width) << line;
    ++rows;
  }
  EXPECT_GT(rows, 8);
  h.allocator->deallocate(a);
}

TEST(AllocConfEnvironment, OverridesTheGivenOptions) {
  AllocatorOptions base;
  base.policy = "pytorch";
  base.capacity = 123;
  ::setenv("MEMTRAIN_ALLOC_CONF", "expandable_segments:True,capacity:1GiB", 1);
  const AllocatorOptions o = apply_alloc_conf_environment(base);
  ::unsetenv("MEMTRAIN_ALLOC_CONF");
  EXPECT_EQ(o.policy, "pytorch") << "keys not in the variable keep the base value";
  EXPECT_TRUE(o.expandable_segments);
  EXPECT_EQ(o.capacity, GiB);
  EXPECT_EQ(apply_alloc_conf_environment(base).capacity, 123u) << "unset: base unchanged";
  ::setenv("MEMTRAIN_ALLOC_CONF", "policy:magic", 1);
  EXPECT_THROW(apply_alloc_conf_environment(base), std::invalid_argument);
  ::unsetenv("MEMTRAIN_ALLOC_CONF");
}

}  // namespace
}  // namespace memtrain::memory
