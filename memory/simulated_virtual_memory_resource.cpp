#include "memory/simulated_virtual_memory_resource.hpp"

#include <stdexcept>
#include <string>

#include "memory/allocation_policy.hpp"
#include "memory/byte_size.hpp"
#include "memory/out_of_memory.hpp"

namespace memtrain::memory {
namespace {
// A different region from SimulatedResource's, so traces of the two never share addresses.
constexpr std::uintptr_t kBase = std::uintptr_t{1} << 45;
}  // namespace

SimulatedVirtualMemoryResource::SimulatedVirtualMemoryResource(std::size_t capacity_bytes, std::string name,
                                                               std::size_t granularity)
    : capacity_(capacity_bytes), name_(std::move(name)), granularity_(granularity), next_address_(kBase) {
  if (granularity == 0 || (granularity & (granularity - 1)) != 0) {
    throw std::invalid_argument("SimulatedVirtualMemoryResource: granularity " + std::to_string(granularity) +
                                " is not a power of two");
  }
}

VirtualRange SimulatedVirtualMemoryResource::reserve(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  if (bytes == 0 || bytes % granularity_ != 0) {
    throw VirtualMemoryError(name_ + ": reserve of " + std::to_string(bytes) +
                             " bytes, not a positive multiple of the granularity " + std::to_string(granularity_));
  }
  ++counters_.reserve_calls;
  // Address space is never reused: a stale pointer into a released range then stays detectable.
  // A guard page between reservations keeps neighbours from looking contiguous.
  const std::uintptr_t address = next_address_;
  next_address_ += bytes + granularity_;
  reservations_.emplace(address, bytes);
  return VirtualRange{address, bytes};
}

void SimulatedVirtualMemoryResource::release(const VirtualRange& range) {
  std::lock_guard lock(mutex_);
  auto it = reservations_.find(range.address);
  if (it == reservations_.end() || it->second != range.bytes) {
    throw VirtualMemoryError(name_ + ": release of a range that is not reserved");
  }
  auto m = mappings_.lower_bound(range.address);
  if (m != mappings_.end() && m->first < range.address + range.bytes) {
    throw VirtualMemoryError(name_ + ": release of a range that still has mapped pages");
  }
  ++counters_.release_calls;
  reservations_.erase(it);
}

PhysicalHandle SimulatedVirtualMemoryResource::create_physical(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  if (bytes == 0 || bytes % granularity_ != 0) {
    throw VirtualMemoryError(name_ + ": create_physical of " + std::to_string(bytes) +
                             " bytes, not a positive multiple of the granularity");
  }
  if (bytes > capacity_ - physical_bytes_) {
    throw OutOfMemory("out of memory on " + name_ + ": tried to create " + format_byte_size(bytes) +
                          " of physical memory; capacity " + format_byte_size(capacity_) + ", " +
                          format_byte_size(capacity_ - physical_bytes_) + " free",
                      bytes);
  }
  ++counters_.create_calls;
  physical_bytes_ += bytes;
  const PhysicalHandle handle = next_handle_++;
  chunks_.emplace(handle, bytes);
  return handle;
}

void SimulatedVirtualMemoryResource::release_physical(PhysicalHandle handle) {
  std::lock_guard lock(mutex_);
  auto it = chunks_.find(handle);
  if (it == chunks_.end()) {
    throw VirtualMemoryError(name_ + ": release_physical of unknown handle " + std::to_string(handle) +
                             " (released twice?)");
  }
  if (chunk_maps_[handle] != 0) {
    throw VirtualMemoryError(name_ + ": release_physical of handle " + std::to_string(handle) +
                             " that is still mapped");
  }
  ++counters_.release_physical_calls;
  physical_bytes_ -= it->second;
  chunks_.erase(it);
  chunk_maps_.erase(handle);
  released_physical_log_.push_back(handle);
}

void SimulatedVirtualMemoryResource::map(std::uintptr_t address, std::size_t bytes, PhysicalHandle handle,
                                         std::size_t offset) {
  std::lock_guard lock(mutex_);
  if (fail_map_in_ != 0 && --fail_map_in_ == 0) {
    ++counters_.failed_map_calls;
    throw VirtualMemoryError(name_ + ": injected map failure at address " + std::to_string(address));
  }
  auto chunk = chunks_.find(handle);
  if (chunk == chunks_.end()) throw VirtualMemoryError(name_ + ": map of unknown handle");
  if (bytes == 0 || bytes % granularity_ != 0 || address % granularity_ != 0 || offset % granularity_ != 0 ||
      offset > chunk->second || bytes > chunk->second - offset) {
    throw VirtualMemoryError(name_ + ": map with unaligned or out-of-chunk size/offset");
  }
  auto r = reservations_.upper_bound(address);
  if (r == reservations_.begin()) throw VirtualMemoryError(name_ + ": map outside reservations");
  --r;
  if (address + bytes > r->first + r->second) {
    throw VirtualMemoryError(name_ + ": map outside reservations");
  }
  auto next = mappings_.lower_bound(address);
  if (next != mappings_.end() && next->first < address + bytes) {
    throw VirtualMemoryError(name_ + ": map over mapped pages");
  }
  if (next != mappings_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second.bytes > address) {
      throw VirtualMemoryError(name_ + ": map over mapped pages");
    }
  }
  ++counters_.map_calls;
  ++chunk_maps_[handle];
  mappings_.emplace(address, Mapping{bytes, handle});
  mapped_log_.push_back(address);
}

void SimulatedVirtualMemoryResource::unmap(std::uintptr_t address, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  // Unmapping may cover several earlier map() calls, as cuMemUnmap may; each must lie inside.
  auto it = mappings_.lower_bound(address);
  if (it == mappings_.end() || it->first != address) {
    throw VirtualMemoryError(name_ + ": unmap of an address that is not mapped");
  }
  std::size_t covered = 0;
  while (it != mappings_.end() && it->first == address + covered && covered < bytes) {
    covered += it->second.bytes;
    ++it;
  }
  if (covered != bytes) {
    throw VirtualMemoryError(name_ + ": unmap of a range that is not exactly mapped");
  }
  ++counters_.unmap_calls;
  it = mappings_.find(address);
  while (covered > 0) {
    covered -= it->second.bytes;
    --chunk_maps_[it->second.handle];
    unmapped_log_.push_back(it->first);
    it = mappings_.erase(it);
  }
}

void SimulatedVirtualMemoryResource::inject_map_failure(std::size_t nth_call) {
  std::lock_guard lock(mutex_);
  fail_map_in_ = nth_call;
}

SimulatedVirtualMemoryResource::Counters SimulatedVirtualMemoryResource::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

std::size_t SimulatedVirtualMemoryResource::physical_bytes() const {
  std::lock_guard lock(mutex_);
  return physical_bytes_;
}

std::size_t SimulatedVirtualMemoryResource::mapped_bytes() const {
  std::lock_guard lock(mutex_);
  std::size_t total = 0;
  for (const auto& [address, m] : mappings_) total += m.bytes;
  return total;
}

std::size_t SimulatedVirtualMemoryResource::live_reservations() const {
  std::lock_guard lock(mutex_);
  return reservations_.size();
}

std::size_t SimulatedVirtualMemoryResource::live_chunks() const {
  std::lock_guard lock(mutex_);
  return chunks_.size();
}

std::vector<std::uintptr_t> SimulatedVirtualMemoryResource::mapped_log() const {
  std::lock_guard lock(mutex_);
  return mapped_log_;
}

std::vector<std::uintptr_t> SimulatedVirtualMemoryResource::unmapped_log() const {
  std::lock_guard lock(mutex_);
  return unmapped_log_;
}

std::vector<PhysicalHandle> SimulatedVirtualMemoryResource::released_physical_log() const {
  std::lock_guard lock(mutex_);
  return released_physical_log_;
}

}  // namespace memtrain::memory
