#include "memory/virtual_memory_resource.hpp"

#include <stdexcept>
#include <string>
#include <vector>

#include "memory/allocation_policy.hpp"

namespace memtrain::memory {

VirtualMemoryResource::~VirtualMemoryResource() = default;

void* VirtualMemoryResource::do_allocate(std::size_t bytes, std::size_t alignment, StreamId) {
  const std::size_t page = granularity();
  if (alignment > page) {
    throw std::invalid_argument(name() + ": alignment " + std::to_string(alignment) +
                                " exceeds the mapping granularity " + std::to_string(page));
  }
  const std::size_t size = round_up_checked(bytes == 0 ? 1 : bytes, page);
  if (size == 0) {
    throw std::invalid_argument(name() + ": " + std::to_string(bytes) + " bytes cannot be rounded up to the page size");
  }
  const VirtualRange range = reserve(size);
  PhysicalHandle handle = 0;
  try {
    handle = create_physical(size);
  } catch (...) {
    release(range);
    throw;
  }
  try {
    map(range.address, size, handle, 0);
  } catch (...) {
    release_physical(handle);
    release(range);
    throw;
  }
  std::lock_guard lock(plain_mutex_);
  plain_chunks_.emplace(range.address, handle);
  return reinterpret_cast<void*>(range.address);
}

void VirtualMemoryResource::do_deallocate(void* p, std::size_t bytes, std::size_t, StreamId) {
  if (p == nullptr) return;
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  PhysicalHandle handle = 0;
  {
    std::lock_guard lock(plain_mutex_);
    auto it = plain_chunks_.find(address);
    if (it == plain_chunks_.end()) {
      throw VirtualMemoryError(name() + ": deallocate of an address it did not allocate");
    }
    handle = it->second;
    plain_chunks_.erase(it);
  }
  const std::size_t size = round_up_checked(bytes == 0 ? 1 : bytes, granularity());
  unmap(address, size);
  release_physical(handle);
  release(VirtualRange{address, size});
}

void map_fresh_pages(VirtualMemoryResource& vmm, const VirtualRange& range, PhysicalHandle* handles_out) {
  const std::size_t page = vmm.granularity();
  const std::size_t count = range.bytes / page;
  std::size_t created = 0;
  std::size_t mapped = 0;
  try {
    for (; created < count; ++created) handles_out[created] = vmm.create_physical(page);
    for (; mapped < count; ++mapped) {
      vmm.map(range.address + mapped * page, page, handles_out[mapped], 0);
    }
  } catch (...) {
    // Undo in reverse: exactly the pages mapped, then every chunk created, each once.
    while (mapped > 0) {
      --mapped;
      vmm.unmap(range.address + mapped * page, page);
    }
    for (std::size_t i = 0; i < created; ++i) vmm.release_physical(handles_out[i]);
    throw;
  }
}

void map_existing_pages(VirtualMemoryResource& vmm, std::uintptr_t address, const PhysicalHandle* handles,
                        std::size_t count) {
  const std::size_t page = vmm.granularity();
  std::size_t mapped = 0;
  try {
    for (; mapped < count; ++mapped) vmm.map(address + mapped * page, page, handles[mapped], 0);
  } catch (...) {
    while (mapped > 0) {
      --mapped;
      vmm.unmap(address + mapped * page, page);
    }
    throw;
  }
}

}  // namespace memtrain::memory
