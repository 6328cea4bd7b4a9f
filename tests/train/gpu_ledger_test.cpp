// Issue 44, section 6: a GPU's memory goes through a ledger of its own, keyed by its UUID
// (Note [One ledger per GPU]). The stack the CUDA allocator gets (on_ledger over the device
// resource) is built here over a simulated device that stands for the GPU: jobs share its
// capacity by the ledger's rules, and memory taken by a process outside the ledger (a PyTorch
// job) is seen through the device's own free figure (Note [The ledger and the device
// disagree]). Byte counts are computed by hand.
#include <gtest/gtest.h>

#include <memory>

#include "memory/caching_allocator.hpp"
#include "memory/out_of_memory.hpp"
#include "memory/quota_resource_adaptor.hpp"
#include "memory/quota_virtual_memory_resource.hpp"
#include "memory/simulated_resource.hpp"
#include "memory/simulated_virtual_memory_resource.hpp"
#include "runtime/train/model_memory.hpp"
#include "tests/memory/ledger_test_util.hpp"

namespace memtrain::train {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

TEST(GpuLedger, TheLedgerIsNamedByTheGpusUuidAsNvidiaSmiPrintsIt) {
  const std::array<unsigned char, 16> uuid = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                                              0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
  MemoryConfig c;
  EXPECT_EQ(gpu_ledger_name(c, uuid), "gpu-00112233-4455-6677-8899-aabbccddeeff");
  c.ledger = "team-a";
  EXPECT_EQ(gpu_ledger_name(c, uuid), "team-a-gpu-00112233-4455-6677-8899-aabbccddeeff");
}

TEST(GpuLedger, OnlyAJobWithCapacityLimitOrReservationJoins) {
  memory::testing::ScopedDevice dev;
  auto gpu = std::make_shared<memory::SimulatedResource>(100 * MiB, "simulated gpu");
  MemoryConfig c;
  EXPECT_EQ(on_ledger(gpu, c, {}, dev.name, 100 * MiB), gpu);
  c.limit = 10 * MiB;
  EXPECT_NE(dynamic_cast<memory::QuotaResourceAdaptor*>(on_ledger(gpu, c, {}, dev.name, 100 * MiB).get()), nullptr);
  auto vmm = std::make_shared<memory::SimulatedVirtualMemoryResource>(100 * MiB, "simulated gpu");
  EXPECT_NE(dynamic_cast<memory::QuotaVirtualMemoryResource*>(on_ledger(vmm, c, {}, dev.name, 100 * MiB).get()),
            nullptr);
}

// Two jobs on a 100 MiB GPU, the ledger's capacity the GPU's (memory.capacity 0): B reserves
// 30 MiB, so A may grow to 70 MiB and no further, and B's 30 MiB stay B's.
TEST(GpuLedger, JobsOnOneGpuKeepTheirReservations) {
  memory::testing::ScopedDevice dev;
  auto gpu = std::make_shared<memory::SimulatedResource>(100 * MiB, "simulated gpu");
  MemoryConfig a, b;
  a.limit = 100 * MiB;
  b.limit = 100 * MiB;
  b.reservation = 30 * MiB;
  b.capacity = 100 * MiB;  // a reservation needs a capacity, as on the host
  a.capacity = 100 * MiB;
  memory::CachingAllocator job_b(on_ledger(gpu, b, {"/runs/b", "b"}, dev.name, gpu->capacity_bytes()));
  memory::CachingAllocator job_a(on_ledger(gpu, a, {"/runs/a", "a"}, dev.name, gpu->capacity_bytes()));
  memory::Block x = job_a.allocate(70 * MiB);
  EXPECT_THROW(job_a.allocate(2 * MiB), OutOfMemory);
  memory::Block y = job_b.allocate(30 * MiB);
  job_a.deallocate(x);
  job_b.deallocate(y);
}

// A process outside the ledger takes 50 MiB of the GPU: the ledger still offers A 100 MiB,
// the device only 50; the smaller wins, and the message says so.
TEST(GpuLedger, MemoryTakenOutsideTheLedgerCountsThroughTheDevicesFreeBytes) {
  memory::testing::ScopedDevice dev;
  auto gpu = std::make_shared<memory::SimulatedResource>(100 * MiB, "simulated gpu");
  void* foreign = gpu->allocate(50 * MiB);
  MemoryConfig a;
  a.capacity = 100 * MiB;
  auto upstream = on_ledger(gpu, a, {"/runs/a", "a"}, dev.name, gpu->capacity_bytes());
  EXPECT_EQ(upstream->available_bytes(), 50 * MiB);
  memory::CachingAllocator job_a(upstream);
  try {
    job_a.allocate(60 * MiB);
    FAIL() << "60 MiB on a GPU with 50 MiB free";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("capacity 100.00 MiB, 50.00 MiB free"), std::string::npos) << e.what();
  }
  gpu->deallocate(foreign, 50 * MiB);
  EXPECT_EQ(upstream->available_bytes(), 100 * MiB);
}

}  // namespace
}  // namespace memtrain::train
