// Shared cases run over every resource and adaptor stack (issue 3: "a test suite that runs every
// shared test over every resource/policy"), then what each adaptor adds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "memory/host_resource.hpp"
#include "memory/host_virtual_memory_resource.hpp"
#include "memory/limit_resource_adaptor.hpp"
#include "memory/out_of_memory.hpp"
#include "memory/simulated_resource.hpp"
#include "memory/simulated_virtual_memory_resource.hpp"
#include "memory/statistics_resource_adaptor.hpp"
#include "memory/tracing_resource_adaptor.hpp"

namespace memtrain::memory {
namespace {

constexpr std::size_t kMiB = 1 << 20;

struct Stack {
  std::string name;
  // A fresh stack; `capacity` bounds it (0: use the stack's own bound, if any).
  std::function<std::shared_ptr<MemoryResource>()> make;
  std::size_t max_alignment;  // largest alignment the stack supports
};

void PrintTo(const Stack& s, std::ostream* os) { *os << s.name; }

std::vector<Stack> stacks() {
  auto ignore = [](const TraceEvent&) {};
  return {
      {"host", [] { return std::make_shared<HostResource>(); }, 4096},
      {"simulated", [] { return std::make_shared<SimulatedResource>(64 * kMiB); }, 4096},
      {"host_vmm", [] { return std::make_shared<HostVirtualMemoryResource>(64 * kMiB, 64 << 10); }, 64 << 10},
      {"simulated_vmm", [] { return std::make_shared<SimulatedVirtualMemoryResource>(64 * kMiB, "sim vmm", 64 << 10); },
       64 << 10},
      {"limit(host)",
       [] { return std::make_shared<LimitResourceAdaptor>(std::make_shared<HostResource>(), 64 * kMiB); }, 4096},
      {"statistics(simulated)",
       [] { return std::make_shared<StatisticsResourceAdaptor>(std::make_shared<SimulatedResource>(64 * kMiB)); },
       4096},
      {"tracing(host)",
       [ignore] { return std::make_shared<TracingResourceAdaptor>(std::make_shared<HostResource>(), ignore); }, 4096},
      {"limit(statistics(tracing(host_vmm)))",
       [ignore] {
         auto vmm = std::make_shared<HostVirtualMemoryResource>(0, 64 << 10);
         auto traced = std::make_shared<TracingResourceAdaptor>(vmm, ignore);
         auto counted = std::make_shared<StatisticsResourceAdaptor>(traced);
         return std::make_shared<LimitResourceAdaptor>(counted, 64 * kMiB);
       },
       64 << 10},
  };
}

class EveryStack : public ::testing::TestWithParam<Stack> {};

// Issue 3, case 9 at the resource level: every power of two up to what the stack supports,
// sizes from 1 byte up; memory that is real is written end to end.
TEST_P(EveryStack, HonoursEveryPowerOfTwoAlignment) {
  auto mr = GetParam().make();
  for (std::size_t align = 1; align <= GetParam().max_alignment; align *= 2) {
    for (std::size_t bytes : {std::size_t{1}, std::size_t{3}, align, align + 1, std::size_t{100000}}) {
      void* p = mr->allocate(bytes, align);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % align, 0u) << bytes << " bytes, align " << align;
      if (mr->backs_memory()) std::memset(p, 0x5a, bytes);
      mr->deallocate(p, bytes, align);
    }
  }
}

TEST_P(EveryStack, LiveAllocationsNeverOverlap) {
  auto mr = GetParam().make();
  struct Live {
    std::uintptr_t begin, end;
    std::size_t bytes;
  };
  std::vector<Live> live;
  for (std::size_t i = 0; i < 40; ++i) {
    const std::size_t bytes = 1000 + i * 7919;
    const auto p = reinterpret_cast<std::uintptr_t>(mr->allocate(bytes, 256));
    live.push_back({p, p + bytes, bytes});
    if (i % 3 == 2) {  // free one in three to make holes
      mr->deallocate(reinterpret_cast<void*>(live[i - 1].begin), live[i - 1].bytes, 256);
      live[i - 1].bytes = 0;
    }
  }
  std::erase_if(live, [](const Live& l) { return l.bytes == 0; });
  std::sort(live.begin(), live.end(), [](const Live& a, const Live& b) { return a.begin < b.begin; });
  for (std::size_t i = 1; i < live.size(); ++i) EXPECT_LE(live[i - 1].end, live[i].begin);
  for (const auto& l : live) mr->deallocate(reinterpret_cast<void*>(l.begin), l.bytes, 256);
}

// Bounded stacks refuse past their capacity with OutOfMemory and serve again after a free.
TEST_P(EveryStack, PastTheCapacityIsOutOfMemoryAndRecoverable) {
  auto mr = GetParam().make();
  if (mr->capacity_bytes() == 0) GTEST_SKIP() << "unbounded";
  const std::size_t half = mr->capacity_bytes() / 2;
  void* a = mr->allocate(half, 256);
  void* b = mr->allocate(half, 256);
  EXPECT_THROW(mr->allocate(half, 256), memtrain::OutOfMemory);
  mr->deallocate(a, half, 256);
  void* c = mr->allocate(half, 256);
  mr->deallocate(b, half, 256);
  mr->deallocate(c, half, 256);
}

INSTANTIATE_TEST_SUITE_P(Resources, EveryStack, ::testing::ValuesIn(stacks()),
                         [](const ::testing::TestParamInfo<Stack>& info) {
                           std::string n = info.param.name;
                           std::replace_if(
                               n.begin(), n.end(), [](char c) { return !std::isalnum(c); }, '_');
                           return n;
                         });

TEST(LimitResourceAdaptor, ChargesAlignedSizesAndReleasesOnFree) {
  auto sim = std::make_shared<SimulatedResource>(1 << 30);
  LimitResourceAdaptor limit(sim, 1000);
  void* a = limit.allocate(300, 256);  // occupies 512
  EXPECT_EQ(limit.used_bytes(), 512u);
  EXPECT_EQ(limit.capacity_bytes(), 1000u);
  try {
    limit.allocate(600, 1);
    FAIL() << "exceeded the limit";
  } catch (const memtrain::OutOfMemory& e) {
    EXPECT_EQ(e.requested_bytes(), 600u);
    EXPECT_NE(std::string(e.what()).find("488 B left"), std::string::npos) << e.what();
  }
  EXPECT_EQ(limit.used_bytes(), 512u);
  void* b = limit.allocate(488, 1);
  EXPECT_EQ(limit.used_bytes(), 1000u);
  limit.deallocate(a, 300, 256);
  limit.deallocate(b, 488, 1);
  EXPECT_EQ(limit.used_bytes(), 0u);
  EXPECT_EQ(sim->used_bytes(), 0u);
}

TEST(LimitResourceAdaptor, AnUpstreamFailureChargesNothing) {
  auto sim = std::make_shared<SimulatedResource>(1024);
  LimitResourceAdaptor limit(sim, 1 << 20);
  EXPECT_EQ(limit.capacity_bytes(), 1024u);  // the smaller of limit and upstream
  EXPECT_THROW(limit.allocate(4096, 256), memtrain::OutOfMemory);
  EXPECT_EQ(limit.used_bytes(), 0u);
  EXPECT_THROW(LimitResourceAdaptor(nullptr, 1), std::invalid_argument);
}

// Hand-computed sequence: +100, +300, -100, +50 -> current 350, peak 400, allocated 450, freed 100.
TEST(StatisticsResourceAdaptor, CountsBytesAndAllocationsWithPeaks) {
  StatisticsResourceAdaptor stats(std::make_shared<HostResource>());
  void* a = stats.allocate(100);
  void* b = stats.allocate(300);
  stats.deallocate(a, 100);
  void* c = stats.allocate(50);
  auto s = stats.counters();
  EXPECT_EQ(s.bytes.current, 350);
  EXPECT_EQ(s.bytes.peak, 400);
  EXPECT_EQ(s.bytes.allocated, 450);
  EXPECT_EQ(s.bytes.freed, 100);
  EXPECT_EQ(s.allocations.current, 2);
  EXPECT_EQ(s.allocations.peak, 2);
  EXPECT_EQ(s.allocations.allocated, 3);
  stats.reset_peaks();
  EXPECT_EQ(stats.counters().bytes.peak, 350);
  stats.deallocate(b, 300);
  stats.deallocate(c, 50);
  EXPECT_EQ(stats.counters().bytes.current, 0);
}

TEST(StatisticsResourceAdaptor, FailedAllocationsCountNothing) {
  StatisticsResourceAdaptor stats(std::make_shared<SimulatedResource>(1000));
  EXPECT_THROW(stats.allocate(2000), memtrain::OutOfMemory);
  EXPECT_EQ(stats.counters().allocations.allocated, 0);
  EXPECT_EQ(stats.counters().bytes.peak, 0);
}

TEST(TracingResourceAdaptor, RecordsAllocFreeAndOomWithMatchingIds) {
  std::vector<TraceEvent> events;
  TracingResourceAdaptor tracing(
      std::make_shared<SimulatedResource>(4096), [&](const TraceEvent& e) { events.push_back(e); }, TagId{7});
  void* a = tracing.allocate(1024, 256, StreamId{2});
  void* b = tracing.allocate(2048, 256);
  EXPECT_THROW(tracing.allocate(8192, 256), memtrain::OutOfMemory);
  tracing.deallocate(a, 1024, 256, StreamId{2});
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].kind, TraceEventKind::segment_alloc);
  EXPECT_EQ(events[0].bytes, 1024u);
  EXPECT_EQ(events[0].address, reinterpret_cast<std::uintptr_t>(a));
  EXPECT_EQ(events[0].stream, 2u);
  EXPECT_EQ(events[0].tag, 7u);
  EXPECT_EQ(events[1].address, reinterpret_cast<std::uintptr_t>(b));
  EXPECT_NE(events[0].allocation_id, events[1].allocation_id);
  EXPECT_EQ(events[2].kind, TraceEventKind::oom);
  EXPECT_EQ(events[2].bytes, 8192u);
  EXPECT_EQ(events[3].kind, TraceEventKind::segment_free);
  EXPECT_EQ(events[3].allocation_id, events[0].allocation_id);
  for (std::size_t i = 1; i < events.size(); ++i) EXPECT_GE(events[i].time_ns, events[i - 1].time_ns);
  tracing.deallocate(b, 2048, 256);
}

}  // namespace
}  // namespace memtrain::memory
