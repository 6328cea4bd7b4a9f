#include "memory/huge_pages.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "memory/byte_size.hpp"
#include "memory/out_of_memory.hpp"

namespace memtrain::memory {

// Note [Transparent huge pages for host memory]
// A training step streams through tensors of megabytes: the GEMMs pack their operands from them
// (the tied MLM decoder's weight alone is 94 MB for BERT), and the optimizer, the gradient norm
// and the elementwise ops read every parameter, gradient and activation. In 4 KiB pages each
// 4 KiB needs its own TLB entry, and a core's second-level TLB (a few thousand entries) covers
// about 8 to 12 MiB, far less than any of these sweeps. Debian's default transparent-huge-page
// mode is `madvise`: only ranges advised MADV_HUGEPAGE get 2 MiB pages. So the host resource
// maps allocations of one huge page or more itself, aligned to 2 MiB and rounded up to whole
// huge pages, and advises them (PyTorch's CPU allocator does the same behind
// THP_MEM_ALLOC_ENABLE=1), when memory.host_huge_pages asks for it.
//
// Measured on bench-bert (fp32, 2 threads, SkylakeX kernels, this project's 2-vCPU AMD EPYC
// virtual machine), alternating pairs of runs with and without: a first prototype (advice on
// the 2 MiB-aligned interior of the C++ allocator's blocks) gave a median pair ratio of 1.06 over
// 7 pairs (0.96 to 1.09, 5 of 7 faster); this code gave 1.00 over 11 pairs (0.95 to 1.14, 5 of 11
// faster; the GEMM rows alike), with 815 MB of the 855 MB resident set in huge pages, and peak
// RSS 9% higher. So no speed-up shows on this machine, where the hypervisor's own page size
// also decides what a TLB miss costs, and the option is off by default; on a bare-metal host
// it may pay, which is why it stays.
//
// The costs: an allocation's last huge page is whole even when partly used (at most 2 MiB per
// allocation; the caching allocator asks for few, large segments), and a fault maps 2 MiB at
// once (at start-up: the steps reuse the allocator's memory and take no page faults).
// Allocations below one huge page keep the C++ allocator: a huge page for each would multiply
// their memory.

std::size_t huge_page_round_up(std::size_t bytes) {
  if (bytes > std::numeric_limits<std::size_t>::max() - (kHugePageBytes - 1)) {
    throw OutOfMemory("out of memory on host: " + std::to_string(bytes) + " bytes do not fit the address space", bytes);
  }
  return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

void* map_huge_pages(std::size_t bytes, std::size_t alignment) {
  if (bytes == 0) throw std::invalid_argument("map_huge_pages: 0 bytes");
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    throw std::invalid_argument("map_huge_pages: alignment " + std::to_string(alignment) + " is not a power of two");
  }
  const std::size_t align = alignment > kHugePageBytes ? alignment : kHugePageBytes;
  const std::size_t size = huge_page_round_up(bytes);
  if (size > std::numeric_limits<std::size_t>::max() - align) {
    throw OutOfMemory("out of memory on host: " + std::to_string(bytes) + " bytes do not fit the address space", bytes);
  }
  // mmap aligns to the base page only: map one alignment more and trim both ends.
  const std::size_t span = size + align;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    const int err = errno;
    throw OutOfMemory("out of memory on host: tried to map " + format_byte_size(bytes) + " in huge pages (" +
                          std::strerror(err) + ")",
                      bytes);
  }
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + align - 1) / align * align;
  if (aligned > start) ::munmap(raw, aligned - start);
  const std::uintptr_t end = start + span, used_end = aligned + size;
  if (end > used_end) ::munmap(reinterpret_cast<void*>(used_end), end - used_end);
  void* p = reinterpret_cast<void*>(aligned);
  // Advice only: EINVAL where the kernel lacks transparent huge pages leaves 4 KiB pages.
  ::madvise(p, size, MADV_HUGEPAGE);
  return p;
}

void unmap_huge_pages(void* p, std::size_t bytes) noexcept {
  if (p == nullptr || bytes == 0) return;
  const std::size_t size = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  ::munmap(p, size);
}

}  // namespace memtrain::memory
