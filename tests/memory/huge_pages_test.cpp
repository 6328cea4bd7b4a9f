// Host memory in transparent huge pages (memory/huge_pages.hpp, Note [Transparent huge pages for
// host memory]): the mapping's size, alignment and contents, and the kernel's own view of the
// advice (/proc/self/smaps), through map_huge_pages and through HostResource.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "memory/host_resource.hpp"
#include "memory/huge_pages.hpp"
#include "memory/out_of_memory.hpp"

namespace memtrain::memory {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

// The VmFlags of the mapping holding p, from /proc/self/smaps (proc(5)): "hg" is MADV_HUGEPAGE.
std::string vm_flags_at(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= a && a < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

// A kernel built without transparent huge pages refuses the advice (EINVAL): nothing to see.
bool kernel_has_thp() {
  std::ifstream enabled("/sys/kernel/mm/transparent_hugepage/enabled");
  return enabled.good();
}

bool has_flag(const std::string& flags, const std::string& flag) {
  std::istringstream in(flags);
  std::string f;
  while (in >> f) {
    if (f == flag) return true;
  }
  return false;
}

TEST(HugePages, SizesRoundUpToWholeHugePages) {
  EXPECT_EQ(huge_page_round_up(1), kHugePageBytes);
  EXPECT_EQ(huge_page_round_up(kHugePageBytes), kHugePageBytes);
  EXPECT_EQ(huge_page_round_up(kHugePageBytes + 1), 2 * kHugePageBytes);
  EXPECT_THROW(huge_page_round_up(SIZE_MAX), OutOfMemory);
}

TEST(HugePages, MappingsAreAlignedZeroedWritableAndAdvised) {
  for (std::size_t bytes : {std::size_t{1}, kHugePageBytes - 1, kHugePageBytes, 5 * MiB + 3}) {
    for (std::size_t align : {std::size_t{64}, kHugePageBytes, 4 * kHugePageBytes}) {
      auto* p = static_cast<unsigned char*>(map_huge_pages(bytes, align));
      ASSERT_NE(p, nullptr);
      const std::size_t want = align > kHugePageBytes ? align : kHugePageBytes;
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % want, 0u) << bytes << " bytes, alignment " << align;
      const std::size_t mapped = huge_page_round_up(bytes);
      EXPECT_EQ(p[0], 0);
      EXPECT_EQ(p[mapped - 1], 0);  // the whole rounded size is mapped
      std::memset(p, 0x5a, mapped);
      if (kernel_has_thp()) {
        EXPECT_TRUE(has_flag(vm_flags_at(p), "hg")) << vm_flags_at(p);
      }
      unmap_huge_pages(p, bytes);
    }
  }
}

TEST(HugePages, BadArgumentsAreRefused) {
  EXPECT_THROW(map_huge_pages(0), std::invalid_argument);
  EXPECT_THROW(map_huge_pages(MiB, 3), std::invalid_argument);
  EXPECT_THROW(map_huge_pages(SIZE_MAX), OutOfMemory);
  EXPECT_THROW(map_huge_pages(SIZE_MAX - 3 * kHugePageBytes, 1ull << 62), OutOfMemory);
  unmap_huge_pages(nullptr, MiB);  // nothing to do, no throw
}

// HostResource(huge_pages): 2 MiB and up in advised huge pages, smaller requests from the C++
// allocator (not advised, not 2 MiB aligned necessarily); without huge_pages nothing is advised.
TEST(HugePages, HostResourceAdvisesLargeAllocationsOnly) {
  HostResource huge(256, true), plain(256, false);
  EXPECT_TRUE(huge.huge_pages());
  EXPECT_FALSE(plain.huge_pages());
  void* big = huge.allocate(3 * MiB, 512);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(big) % kHugePageBytes, 0u);
  std::memset(big, 1, 3 * MiB);
  if (kernel_has_thp()) {
    EXPECT_TRUE(has_flag(vm_flags_at(big), "hg")) << vm_flags_at(big);
  }
  void* small = huge.allocate(64 * 1024, 512);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(small) % 512, 0u);
  std::memset(small, 1, 64 * 1024);
  void* plain_big = plain.allocate(3 * MiB, 512);
  std::memset(plain_big, 1, 3 * MiB);
  EXPECT_FALSE(has_flag(vm_flags_at(plain_big), "hg")) << vm_flags_at(plain_big);
  huge.deallocate(big, 3 * MiB, 512);
  huge.deallocate(small, 64 * 1024, 512);
  plain.deallocate(plain_big, 3 * MiB, 512);
  EXPECT_THROW(huge.allocate(SIZE_MAX, 256), OutOfMemory);
}

}  // namespace
}  // namespace memtrain::memory
