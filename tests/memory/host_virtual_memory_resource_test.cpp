#include "memory/host_virtual_memory_resource.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "memory/out_of_memory.hpp"
#include "tests/memory/fault_injecting_vmm.hpp"

namespace memtrain::memory {
namespace {

constexpr std::size_t kPage = 64 << 10;  // 64 KiB keeps the tests small

unsigned char* at(std::uintptr_t a) { return reinterpret_cast<unsigned char*>(a); }

TEST(HostVirtualMemoryResource, MappedPagesHoldWhatIsWrittenThroughThem) {
  HostVirtualMemoryResource vmm(0, kPage);
  const VirtualRange range = vmm.reserve(4 * kPage);
  EXPECT_EQ(range.address % kPage, 0u);
  PhysicalHandle pages[4];
  map_fresh_pages(vmm, range, pages);
  EXPECT_EQ(vmm.mapped_bytes(), 4 * kPage);
  for (std::size_t i = 0; i < 4 * kPage; ++i) at(range.address)[i] = static_cast<unsigned char>(i * 7);
  for (std::size_t i = 0; i < 4 * kPage; i += 4093) {
    ASSERT_EQ(at(range.address)[i], static_cast<unsigned char>(i * 7));
  }
  vmm.unmap(range.address, 4 * kPage);
  for (PhysicalHandle h : pages) vmm.release_physical(h);
  vmm.release(range);
  EXPECT_EQ(vmm.physical_bytes(), 0u);
  EXPECT_EQ(vmm.live_reservations(), 0u);
}

// The property stitching rests on: the bytes live in the physical chunk, not in the address.
TEST(HostVirtualMemoryResource, TwoRangesMappingOneChunkSeeTheSameBytes) {
  HostVirtualMemoryResource vmm(0, kPage);
  const VirtualRange a = vmm.reserve(kPage), b = vmm.reserve(2 * kPage);
  const PhysicalHandle chunk = vmm.create_physical(kPage);
  vmm.map(a.address, kPage, chunk, 0);
  vmm.map(b.address + kPage, kPage, chunk, 0);
  std::memcpy(at(a.address) + 100, "stitched", 9);
  EXPECT_STREQ(reinterpret_cast<const char*>(at(b.address + kPage) + 100), "stitched");
  at(b.address + kPage)[5000] = 42;
  EXPECT_EQ(at(a.address)[5000], 42);
  // Unmapped and mapped again elsewhere: the contents survive (what a stitched block relies on).
  vmm.unmap(a.address, kPage);
  vmm.map(a.address, kPage, chunk, 0);
  EXPECT_EQ(at(a.address)[5000], 42);
  EXPECT_THROW(vmm.release_physical(chunk), VirtualMemoryError);  // still mapped twice
  vmm.unmap(a.address, kPage);
  vmm.unmap(b.address + kPage, kPage);
  vmm.release_physical(chunk);
  vmm.release(a);
  vmm.release(b);
}

TEST(HostVirtualMemoryResource, MapsAPieceOfALargerChunkAtAnOffset) {
  HostVirtualMemoryResource vmm(0, kPage);
  const PhysicalHandle chunk = vmm.create_physical(3 * kPage);
  const VirtualRange whole = vmm.reserve(3 * kPage), piece = vmm.reserve(kPage);
  vmm.map(whole.address, 3 * kPage, chunk, 0);
  vmm.map(piece.address, kPage, chunk, 2 * kPage);
  at(whole.address)[2 * kPage + 1] = 9;
  EXPECT_EQ(at(piece.address)[1], 9);
}

TEST(HostVirtualMemoryResource, MisuseThrowsVirtualMemoryErrorAndChangesNothing) {
  HostVirtualMemoryResource vmm(0, kPage);
  EXPECT_THROW(vmm.reserve(kPage + 1), VirtualMemoryError);
  EXPECT_THROW(vmm.create_physical(100), VirtualMemoryError);
  const VirtualRange r = vmm.reserve(2 * kPage);
  const PhysicalHandle c = vmm.create_physical(kPage);
  EXPECT_THROW(vmm.map(r.address, kPage, 999, 0), VirtualMemoryError);            // unknown chunk
  EXPECT_THROW(vmm.map(r.address, 2 * kPage, c, 0), VirtualMemoryError);          // beyond chunk
  EXPECT_THROW(vmm.map(r.address + 2 * kPage, kPage, c, 0), VirtualMemoryError);  // outside
  vmm.map(r.address, kPage, c, 0);
  EXPECT_THROW(vmm.map(r.address, kPage, c, 0), VirtualMemoryError);  // over mapped
  EXPECT_THROW(vmm.release(r), VirtualMemoryError);                   // mapped pages
  EXPECT_THROW(vmm.unmap(r.address, 2 * kPage), VirtualMemoryError);  // half unmapped
  EXPECT_EQ(vmm.mapped_bytes(), kPage);
  at(r.address)[0] = 1;  // still mapped and writable after the refused calls
  vmm.unmap(r.address, kPage);
  vmm.release_physical(c);
  vmm.release(r);
  EXPECT_THROW(vmm.release(r), VirtualMemoryError);
  EXPECT_THROW(HostVirtualMemoryResource(0, 3 * 4096), std::invalid_argument);
}

TEST(HostVirtualMemoryResource, ChunksPastTheCapacityAreOutOfMemory) {
  HostVirtualMemoryResource vmm(2 * kPage, kPage);
  const PhysicalHandle a = vmm.create_physical(kPage);
  vmm.create_physical(kPage);
  EXPECT_THROW(vmm.create_physical(kPage), memtrain::OutOfMemory);
  vmm.release_physical(a);
  EXPECT_NO_THROW(vmm.create_physical(kPage));
}

TEST(HostVirtualMemoryResource, PlainAllocationsAreWritableAndReleased) {
  HostVirtualMemoryResource vmm(0, kPage);
  void* p = vmm.allocate(3 * kPage / 2, 256);
  std::memset(p, 0xab, 3 * kPage / 2);
  EXPECT_EQ(vmm.physical_bytes(), 2 * kPage);
  vmm.deallocate(p, 3 * kPage / 2, 256);
  EXPECT_EQ(vmm.physical_bytes(), 0u);
  EXPECT_EQ(vmm.live_reservations(), 0u);
}

// Issue 3, case 5: a fault injected on the third page of a five-page map. Cleanup must unmap
// exactly the two pages that were mapped and release all five chunks, each once.
TEST(HostVirtualMemoryResource, FaultOnThirdPageUndoesExactlyWhatWasDone) {
  HostVirtualMemoryResource host(0, kPage);
  testing::FaultInjectingVmm vmm(host, /*fail_map_call=*/3);
  const VirtualRange range = vmm.reserve(5 * kPage);
  PhysicalHandle pages[5];
  EXPECT_THROW(map_fresh_pages(vmm, range, pages), VirtualMemoryError);
  EXPECT_EQ(vmm.created.size(), 5u);
  EXPECT_EQ(vmm.mapped, (std::vector<std::uintptr_t>{range.address, range.address + kPage}));
  std::vector<std::uintptr_t> unmapped = vmm.unmapped;
  std::sort(unmapped.begin(), unmapped.end());
  EXPECT_EQ(unmapped, vmm.mapped);
  std::multiset<PhysicalHandle> released(vmm.released.begin(), vmm.released.end());
  EXPECT_EQ(released, std::multiset<PhysicalHandle>(vmm.created.begin(), vmm.created.end()));
  EXPECT_EQ(host.live_chunks(), 0u);
  EXPECT_EQ(host.mapped_bytes(), 0u);
  EXPECT_NO_THROW(vmm.release(range));  // nothing left mapped in it
  EXPECT_EQ(host.live_reservations(), 0u);
}

}  // namespace
}  // namespace memtrain::memory
