// QuotaVirtualMemoryResource: physical chunks are charged, address reservations are not, and
// vmm_stitch runs within a job's limit, against the simulated virtual-memory device's own
// counters.
#include "memory/quota_virtual_memory_resource.hpp"

#include <gtest/gtest.h>

#include "memory/caching_allocator.hpp"
#include "memory/out_of_memory.hpp"
#include "memory/simulated_virtual_memory_resource.hpp"
#include "tests/memory/ledger_test_util.hpp"

namespace memtrain::memory {
namespace {

using testing::ScopedDevice;
constexpr std::size_t MiB = std::size_t{1} << 20;

TEST(QuotaVirtualMemoryResource, PhysicalChunksAreChargedAndReservationsAreNot) {
  ScopedDevice dev;
  auto device = std::make_shared<SimulatedVirtualMemoryResource>(1024 * MiB);
  auto ledger = std::make_shared<SharedLedger>(dev.name, 1024 * MiB);
  QuotaVirtualMemoryResource job(device, ledger, {"a", 0, 8 * MiB});
  VirtualRange range = job.reserve(64 * MiB);
  EXPECT_EQ(job.charged_bytes(), 0u);
  PhysicalHandle pages[4];
  for (auto& h : pages) h = job.create_physical(2 * MiB);
  EXPECT_EQ(job.charged_bytes(), 8 * MiB);
  const auto creates = device->counters().create_calls;
  EXPECT_THROW(job.create_physical(2 * MiB), OutOfMemory);
  EXPECT_EQ(device->counters().create_calls, creates);  // refused before the upstream
  EXPECT_EQ(device->physical_bytes(), 8 * MiB);
  for (auto h : pages) job.release_physical(h);
  EXPECT_EQ(job.charged_bytes(), 0u);
  EXPECT_THROW(job.release_physical(pages[0]), VirtualMemoryError);
  job.release(range);
}

TEST(QuotaVirtualMemoryResource, PlainAllocationsAreChargedThroughTheirChunk) {
  ScopedDevice dev;
  auto device = std::make_shared<SimulatedVirtualMemoryResource>(1024 * MiB);
  auto ledger = std::make_shared<SharedLedger>(dev.name, 1024 * MiB);
  QuotaVirtualMemoryResource job(device, ledger, {"a", 0, kNoLimit});
  void* p = job.allocate(3 * MiB);  // one chunk rounded up to the 2 MiB granularity
  EXPECT_EQ(job.charged_bytes(), 4 * MiB);
  job.deallocate(p, 3 * MiB);
  EXPECT_EQ(job.charged_bytes(), 0u);
}

TEST(QuotaVirtualMemoryResource, VmmStitchAllocatorStopsAtTheJobsLimit) {
  ScopedDevice dev;
  auto device = std::make_shared<SimulatedVirtualMemoryResource>(1024 * MiB);
  auto ledger = std::make_shared<SharedLedger>(dev.name, 1024 * MiB);
  auto job = std::make_shared<QuotaVirtualMemoryResource>(device, ledger, JobShare{"a", 0, 256 * MiB});
  AllocatorOptions opt;
  opt.policy = "vmm_stitch";
  CachingAllocator allocator(job, opt);
  Block b = allocator.allocate(200 * MiB);
  EXPECT_THROW(allocator.allocate(100 * MiB), OutOfMemory);
  EXPECT_LE(job->charged_bytes(), 256 * MiB);
  EXPECT_EQ(job->charged_bytes(), static_cast<std::size_t>(allocator.stats().reserved_bytes.current));
  allocator.deallocate(b);
  Block c = allocator.allocate(250 * MiB);  // fits once the first block is back
  allocator.deallocate(c);
  allocator.empty_cache();
  EXPECT_EQ(job->charged_bytes(), 0u);
}

}  // namespace
}  // namespace memtrain::memory
