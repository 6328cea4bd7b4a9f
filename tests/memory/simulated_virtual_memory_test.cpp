// The simulated VMM enforces the VirtualMemoryResource contract: every misuse throws.
#include <gtest/gtest.h>

#include "memory/out_of_memory.hpp"
#include "memory/simulated_virtual_memory_resource.hpp"

namespace memtrain::memory {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

TEST(SimulatedVirtualMemory, RejectsMisuse) {
  SimulatedVirtualMemoryResource vmm(8 * MiB);
  EXPECT_THROW(vmm.reserve(MiB), VirtualMemoryError) << "not a multiple of 2 MiB";
  const VirtualRange r = vmm.reserve(4 * MiB);
  const PhysicalHandle h = vmm.create_physical(2 * MiB);
  EXPECT_THROW(vmm.map(r.address + MiB, 2 * MiB, h, 0), VirtualMemoryError) << "unaligned";
  EXPECT_THROW(vmm.map(r.address + 4 * MiB, 2 * MiB, h, 0), VirtualMemoryError) << "outside";
  EXPECT_THROW(vmm.map(r.address, 4 * MiB, h, 0), VirtualMemoryError) << "beyond the chunk";
  vmm.map(r.address, 2 * MiB, h, 0);
  EXPECT_THROW(vmm.map(r.address, 2 * MiB, h, 0), VirtualMemoryError) << "already mapped";
  EXPECT_THROW(vmm.release_physical(h), VirtualMemoryError) << "still mapped";
  EXPECT_THROW(vmm.release(r), VirtualMemoryError) << "pages still mapped";
  EXPECT_THROW(vmm.unmap(r.address + 2 * MiB, 2 * MiB), VirtualMemoryError) << "not mapped";
  vmm.unmap(r.address, 2 * MiB);
  vmm.release_physical(h);
  EXPECT_THROW(vmm.release_physical(h), VirtualMemoryError) << "released twice";
  vmm.release(r);
  EXPECT_THROW(vmm.release(r), VirtualMemoryError) << "released twice";
}

TEST(SimulatedVirtualMemory, PhysicalMemoryIsCapacityLimitedReservationsAreNot) {
  SimulatedVirtualMemoryResource vmm(4 * MiB);
  const VirtualRange big = vmm.reserve(1024 * MiB);
  const PhysicalHandle a = vmm.create_physical(2 * MiB);
  const PhysicalHandle b = vmm.create_physical(2 * MiB);
  EXPECT_THROW(vmm.create_physical(2 * MiB), OutOfMemory);
  vmm.release_physical(a);
  vmm.release_physical(b);
  vmm.release(big);
  EXPECT_EQ(vmm.physical_bytes(), 0u);
}

TEST(SimulatedVirtualMemory, InjectedFailureHitsTheNthMapOnly) {
  SimulatedVirtualMemoryResource vmm(16 * MiB);
  const VirtualRange r = vmm.reserve(6 * MiB);
  PhysicalHandle h[3] = {vmm.create_physical(2 * MiB), vmm.create_physical(2 * MiB), vmm.create_physical(2 * MiB)};
  vmm.inject_map_failure(2);
  vmm.map(r.address, 2 * MiB, h[0], 0);
  EXPECT_THROW(vmm.map(r.address + 2 * MiB, 2 * MiB, h[1], 0), VirtualMemoryError);
  vmm.map(r.address + 2 * MiB, 2 * MiB, h[1], 0);
  vmm.map(r.address + 4 * MiB, 2 * MiB, h[2], 0);
  EXPECT_EQ(vmm.mapped_bytes(), 6 * MiB);
  vmm.unmap(r.address, 6 * MiB);  // one unmap may cover several mappings
  for (PhysicalHandle x : h) vmm.release_physical(x);
  vmm.release(r);
}

}  // namespace
}  // namespace memtrain::memory
