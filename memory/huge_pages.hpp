#pragma once
// Host memory in transparent huge pages (Note [Transparent huge pages for host memory]).
#include <cstddef>

namespace memtrain::memory {

// The huge page of x86-64 and of 4 KiB-page AArch64 (a page-middle-directory entry).
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// Bytes map_huge_pages(bytes, ...) maps: `bytes` rounded up to whole huge pages. Throws
// OutOfMemory when that overflows.
std::size_t huge_page_round_up(std::size_t bytes);

// Anonymous read-write memory for `bytes` (at least 1), huge_page_round_up(bytes) mapped, at a
// multiple of max(alignment, kHugePageBytes), advised MADV_HUGEPAGE (Linux madvise(2)); fresh
// anonymous pages, so zero-filled. The advice is best effort: where the kernel has no
// transparent huge pages or has them set to `never`, the memory comes in 4 KiB pages.
// Throws OutOfMemory when mmap refuses or the rounded size overflows, std::invalid_argument for
// bytes == 0 or an alignment that is not a power of two.
void* map_huge_pages(std::size_t bytes, std::size_t alignment = kHugePageBytes);

// Returns to the system what map_huge_pages(bytes, ...) gave as p. Never throws.
void unmap_huge_pages(void* p, std::size_t bytes) noexcept;

}  // namespace memtrain::memory
