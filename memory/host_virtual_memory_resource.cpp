#include "memory/host_virtual_memory_resource.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <stdexcept>

#include "memory/byte_size.hpp"
#include "memory/out_of_memory.hpp"

namespace memtrain::memory {
namespace {

std::string errno_text(const char* call) { return std::string(call) + " failed: " + std::strerror(errno); }

// Address space with nothing behind it: PROT_NONE, no swap reservation.
void* reserve_pages(void* at, std::size_t bytes, bool fixed) {
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (fixed ? MAP_FIXED : 0);
  return ::mmap(at, bytes, PROT_NONE, flags, -1, 0);
}

}  // namespace

HostVirtualMemoryResource::HostVirtualMemoryResource(std::size_t capacity_bytes, std::size_t granularity,
                                                     std::string name)
    : capacity_(capacity_bytes), granularity_(granularity), name_(std::move(name)) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  if (granularity == 0 || (granularity & (granularity - 1)) != 0 || granularity % page != 0) {
    throw std::invalid_argument("HostVirtualMemoryResource: granularity " + std::to_string(granularity) +
                                " must be a power of two and a multiple of the page size " + std::to_string(page));
  }
}

HostVirtualMemoryResource::~HostVirtualMemoryResource() {
  // munmap of the reservations also drops every mapping inside them; then the files go.
  for (const auto& [address, bytes] : reservations_) {
    ::munmap(reinterpret_cast<void*>(address), bytes);
  }
  for (const auto& [handle, chunk] : chunks_) ::close(chunk.fd);
}

void HostVirtualMemoryResource::check_multiple(std::size_t value, const char* what) const {
  if (value == 0 || value % granularity_ != 0) {
    throw VirtualMemoryError(name_ + ": " + what + " " + std::to_string(value) +
                             " is not a positive multiple of the granularity " + std::to_string(granularity_) +
                             " bytes");
  }
}

VirtualRange HostVirtualMemoryResource::reserve(std::size_t bytes) {
  check_multiple(bytes, "reservation size");
  if (bytes > SIZE_MAX - granularity_) {
    throw VirtualMemoryError(name_ + ": reservation of " + std::to_string(bytes) + " bytes is too large");
  }
  // mmap aligns to the system page only: take one granularity more and trim both ends.
  const std::size_t padded = bytes + granularity_;
  void* p = reserve_pages(nullptr, padded, false);
  if (p == MAP_FAILED) throw VirtualMemoryError(name_ + ": " + errno_text("mmap(PROT_NONE)"));
  const auto raw = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t aligned = (raw + granularity_ - 1) & ~(std::uintptr_t{granularity_} - 1);
  if (aligned > raw) ::munmap(p, aligned - raw);
  const std::uintptr_t end = aligned + bytes;
  if (raw + padded > end) ::munmap(reinterpret_cast<void*>(end), raw + padded - end);

  std::lock_guard lock(mutex_);
  reservations_[aligned] = bytes;
  return {aligned, bytes};
}

void HostVirtualMemoryResource::release(const VirtualRange& range) {
  std::lock_guard lock(mutex_);
  const auto it = reservations_.find(range.address);
  if (it == reservations_.end() || it->second != range.bytes) {
    throw VirtualMemoryError(name_ + ": release of a range that was not reserved (address " +
                             std::to_string(range.address) + ", " + std::to_string(range.bytes) + " bytes)");
  }
  const auto m = mappings_.lower_bound(range.address);
  if (m != mappings_.end() && m->first < range.address + range.bytes) {
    throw VirtualMemoryError(name_ + ": release of a reservation that still has mapped pages");
  }
  if (::munmap(reinterpret_cast<void*>(range.address), range.bytes) != 0) {
    throw VirtualMemoryError(name_ + ": " + errno_text("munmap"));
  }
  reservations_.erase(it);
}

PhysicalHandle HostVirtualMemoryResource::create_physical(std::size_t bytes) {
  check_multiple(bytes, "chunk size");
  std::lock_guard lock(mutex_);
  if (capacity_ != 0 && bytes > capacity_ - std::min(capacity_, physical_bytes_)) {
    throw OutOfMemory("out of memory on " + name_ + ": tried to create a chunk of " + format_byte_size(bytes) +
                          "; capacity " + format_byte_size(capacity_) + ", " + format_byte_size(physical_bytes_) +
                          " already in chunks",
                      bytes);
  }
  const int fd = ::memfd_create("memtrain-vmm", MFD_CLOEXEC);
  if (fd < 0) throw OutOfMemory(name_ + ": " + errno_text("memfd_create"), bytes);
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const std::string why = errno_text("ftruncate");
    ::close(fd);
    throw OutOfMemory(name_ + ": chunk of " + format_byte_size(bytes) + ": " + why, bytes);
  }
  const PhysicalHandle handle = next_handle_++;
  chunks_[handle] = {fd, bytes, 0};
  physical_bytes_ += bytes;
  return handle;
}

void HostVirtualMemoryResource::release_physical(PhysicalHandle handle) {
  std::lock_guard lock(mutex_);
  const auto it = chunks_.find(handle);
  if (it == chunks_.end()) {
    throw VirtualMemoryError(name_ + ": release of unknown chunk " + std::to_string(handle));
  }
  if (it->second.times_mapped != 0) {
    throw VirtualMemoryError(name_ + ": release of chunk " + std::to_string(handle) + " that is still mapped " +
                             std::to_string(it->second.times_mapped) + " time(s)");
  }
  ::close(it->second.fd);
  physical_bytes_ -= it->second.bytes;
  chunks_.erase(it);
}

void HostVirtualMemoryResource::map(std::uintptr_t address, std::size_t bytes, PhysicalHandle handle,
                                    std::size_t offset) {
  check_multiple(bytes, "map size");
  if (address % granularity_ != 0 || offset % granularity_ != 0) {
    throw VirtualMemoryError(name_ + ": map address and offset must be multiples of the granularity");
  }
  std::lock_guard lock(mutex_);
  const auto chunk = chunks_.find(handle);
  if (chunk == chunks_.end()) {
    throw VirtualMemoryError(name_ + ": map of unknown chunk " + std::to_string(handle));
  }
  if (offset > chunk->second.bytes || bytes > chunk->second.bytes - offset) {
    throw VirtualMemoryError(name_ + ": map of [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) +
                             ") beyond the chunk's " + std::to_string(chunk->second.bytes) + " bytes");
  }
  auto r = reservations_.upper_bound(address);
  if (r == reservations_.begin() || (--r, address + bytes > r->first + r->second) || address + bytes < address) {
    throw VirtualMemoryError(name_ + ": map outside every reserved range");
  }
  const auto next = mappings_.lower_bound(address);
  const bool overlaps_next = next != mappings_.end() && next->first < address + bytes;
  const bool overlaps_prev =
      next != mappings_.begin() && std::prev(next)->first + std::prev(next)->second.bytes > address;
  if (overlaps_next || overlaps_prev) {
    throw VirtualMemoryError(name_ + ": map over pages that are already mapped");
  }
  void* p = ::mmap(reinterpret_cast<void*>(address), bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                   chunk->second.fd, static_cast<off_t>(offset));
  if (p == MAP_FAILED) {
    const std::string why = errno_text("mmap(MAP_FIXED)");
    reserve_pages(reinterpret_cast<void*>(address), bytes, true);  // keep the range reserved
    throw VirtualMemoryError(name_ + ": " + why);
  }
  ++chunk->second.times_mapped;
  mappings_[address] = {bytes, handle};
  mapped_bytes_ += bytes;
}

void HostVirtualMemoryResource::unmap(std::uintptr_t address, std::size_t bytes) {
  check_multiple(bytes, "unmap size");
  std::lock_guard lock(mutex_);
  unmap_locked(address, bytes);
}

void HostVirtualMemoryResource::unmap_locked(std::uintptr_t address, std::size_t bytes) {
  // The range must be a run of whole mappings (as CUDA requires); check before changing anything.
  auto it = mappings_.find(address);
  const auto first = it;
  std::uintptr_t cursor = address;
  while (cursor < address + bytes) {
    if (it == mappings_.end() || it->first != cursor) {
      throw VirtualMemoryError(name_ + ": unmap of a range that is not a run of whole mappings");
    }
    cursor += it->second.bytes;
    ++it;
  }
  if (cursor != address + bytes) throw VirtualMemoryError(name_ + ": unmap ends inside a mapping");
  // One MAP_FIXED call swaps the pages for PROT_NONE address space: never a moment where the
  // range is unreserved and another mmap could take it.
  if (reserve_pages(reinterpret_cast<void*>(address), bytes, true) == MAP_FAILED) {
    throw VirtualMemoryError(name_ + ": " + errno_text("mmap(PROT_NONE, MAP_FIXED)"));
  }
  for (auto m = first; m != it;) {
    --chunks_[m->second.handle].times_mapped;
    mapped_bytes_ -= m->second.bytes;
    m = mappings_.erase(m);
  }
}

std::size_t HostVirtualMemoryResource::physical_bytes() const {
  std::lock_guard lock(mutex_);
  return physical_bytes_;
}
std::size_t HostVirtualMemoryResource::mapped_bytes() const {
  std::lock_guard lock(mutex_);
  return mapped_bytes_;
}
std::size_t HostVirtualMemoryResource::live_chunks() const {
  std::lock_guard lock(mutex_);
  return chunks_.size();
}
std::size_t HostVirtualMemoryResource::live_reservations() const {
  std::lock_guard lock(mutex_);
  return reservations_.size();
}

}  // namespace memtrain::memory
