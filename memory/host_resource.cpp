#include "memory/host_resource.hpp"

#include <algorithm>
#include <new>
#include <stdexcept>
#include <string>

#include "memory/byte_size.hpp"
#include "memory/huge_pages.hpp"
#include "memory/out_of_memory.hpp"

namespace memtrain::memory {
namespace {
bool is_power_of_two(std::size_t x) { return x != 0 && (x & (x - 1)) == 0; }
}  // namespace

HostResource::HostResource(std::size_t min_alignment, bool huge_pages)
    : min_alignment_(min_alignment), huge_pages_(huge_pages) {
  if (!is_power_of_two(min_alignment)) {
    throw std::invalid_argument("HostResource: min_alignment " + std::to_string(min_alignment) +
                                " is not a power of two");
  }
}

void* HostResource::do_allocate(std::size_t bytes, std::size_t alignment, StreamId) {
  if (!is_power_of_two(alignment)) {
    throw std::invalid_argument("HostResource: alignment " + std::to_string(alignment) + " is not a power of two");
  }
  const std::size_t align = std::max(alignment, min_alignment_);
  if (huge_pages_ && bytes >= kHugePageBytes) return map_huge_pages(bytes, align);
  try {
    return ::operator new (std::max<std::size_t>(bytes, 1), std::align_val_t{align});
  } catch (const std::bad_alloc&) {
    throw OutOfMemory("out of memory on host: tried to allocate " + format_byte_size(bytes) + " (the system refused)",
                      bytes);
  }
}

void HostResource::do_deallocate(void* p, std::size_t bytes, std::size_t alignment, StreamId) {
  if (p == nullptr) return;
  if (huge_pages_ && bytes >= kHugePageBytes) {
    unmap_huge_pages(p, bytes);
    return;
  }
  ::operator delete (p, std::align_val_t{std::max(alignment, min_alignment_)});
}

}  // namespace memtrain::memory
