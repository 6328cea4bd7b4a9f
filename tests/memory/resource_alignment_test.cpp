// Case 9: every power-of-two alignment from 1 to 4096 for sizes from 1 byte up, on every
// resource this part provides, and no size arithmetic that wraps.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "memory/host_resource.hpp"
#include "memory/out_of_memory.hpp"
#include "memory/simulated_resource.hpp"
#include "memory/simulated_virtual_memory_resource.hpp"

namespace memtrain::memory {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

std::vector<std::size_t> sizes() {
  std::vector<std::size_t> out;
  for (std::size_t s = 1; s <= 70; ++s) out.push_back(s);
  for (std::size_t s : {255u, 256u, 257u, 4095u, 4096u, 4097u, 65537u, 1048575u}) out.push_back(s);
  return out;
}

void expect_aligned(MemoryResource& r, bool writable) {
  for (std::size_t align = 1; align <= 4096; align *= 2) {
    std::vector<std::pair<void*, std::size_t>> held;
    for (std::size_t bytes : sizes()) {
      void* p = r.allocate(bytes, align);
      ASSERT_NE(p, nullptr);
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % align, 0u)
          << r.name() << " align " << align << " bytes " << bytes;
      if (writable) static_cast<unsigned char*>(p)[bytes - 1] = 1;
      held.emplace_back(p, bytes);
    }
    for (auto [p, bytes] : held) r.deallocate(p, bytes, align);
  }
}

TEST(ResourceAlignment, HostHonoursEveryPowerOfTwo) {
  HostResource r;
  expect_aligned(r, true);
}

// The same sizes plus some past 2 MiB, which HostResource(huge_pages) maps itself.
TEST(ResourceAlignment, HostWithHugePagesHonoursEveryPowerOfTwo) {
  HostResource r(256, /*huge_pages=*/true);
  expect_aligned(r, true);
  for (std::size_t align = 1; align <= 4096; align *= 2) {
    for (std::size_t bytes : {2 * MiB, 2 * MiB + 1, 7 * MiB + 5}) {
      void* p = r.allocate(bytes, align);
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % align, 0u) << bytes;
      static_cast<unsigned char*>(p)[bytes - 1] = 1;
      r.deallocate(p, bytes, align);
    }
  }
}

TEST(ResourceAlignment, SimulatedHonoursEveryPowerOfTwo) {
  SimulatedResource r(64 * MiB);
  expect_aligned(r, false);
  EXPECT_EQ(r.used_bytes(), 0u);
}

TEST(ResourceAlignment, SimulatedVirtualMemoryHonoursEveryPowerOfTwo) {
  SimulatedVirtualMemoryResource r(4096 * MiB);
  expect_aligned(r, false);
  EXPECT_EQ(r.physical_bytes(), 0u);
  EXPECT_EQ(r.live_reservations(), 0u);
}

TEST(ResourceAlignment, NonPowerOfTwoAlignmentIsRejected) {
  HostResource host;
  SimulatedResource sim(MiB);
  EXPECT_THROW(host.allocate(64, 3), std::invalid_argument);
  EXPECT_THROW(sim.allocate(64, 0), std::invalid_argument);
}

// Sizes near SIZE_MAX must fail, not wrap into a small allocation.
TEST(ResourceAlignment, HugeSizesFailWithoutWrapping) {
  SimulatedResource sim(64 * MiB);
  SimulatedVirtualMemoryResource vmm(64 * MiB);
  for (std::size_t bytes : {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 4095, 64 * MiB + 1}) {
    EXPECT_THROW(sim.allocate(bytes, 4096), OutOfMemory) << bytes;
    EXPECT_ANY_THROW(vmm.allocate(bytes, 4096)) << bytes;
  }
  EXPECT_EQ(sim.used_bytes(), 0u);
  EXPECT_EQ(vmm.physical_bytes(), 0u);
  EXPECT_EQ(vmm.live_reservations(), 0u);
}

// The simulated device's addresses are reproducible: the same calls give the same addresses.
TEST(ResourceAlignment, SimulatedAddressesAreReproducible) {
  auto run = [] {
    SimulatedResource r(64 * MiB);
    std::vector<void*> out;
    void* a = r.allocate(1000, 256);
    void* b = r.allocate(5000, 512);
    r.deallocate(a, 1000, 256);
    out = {a, b, r.allocate(800, 256)};
    return out;
  };
  EXPECT_EQ(run(), run());
}

}  // namespace
}  // namespace memtrain::memory
