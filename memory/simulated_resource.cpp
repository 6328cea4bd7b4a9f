#include "memory/simulated_resource.hpp"

#include <algorithm>
#include <stdexcept>

#include "memory/byte_size.hpp"
#include "memory/out_of_memory.hpp"

namespace memtrain::memory {
namespace {
// Far above any heap or mmap address a 47-bit user space hands out, so a simulated pointer is
// never mistaken for real memory, and aligned to 1 GiB so alignments up to that hold.
constexpr std::uintptr_t kBase = std::uintptr_t{1} << 46;
bool is_power_of_two(std::size_t x) { return x != 0 && (x & (x - 1)) == 0; }
}  // namespace

SimulatedResource::SimulatedResource(std::size_t capacity_bytes, std::string name)
    : capacity_(capacity_bytes), name_(std::move(name)), next_(kBase) {}

std::size_t SimulatedResource::used_bytes() const {
  std::lock_guard lock(mutex_);
  return used_;
}

void* SimulatedResource::do_allocate(std::size_t bytes, std::size_t alignment, StreamId) {
  if (!is_power_of_two(alignment)) {
    throw std::invalid_argument("SimulatedResource: alignment " + std::to_string(alignment) + " is not a power of two");
  }
  const std::size_t size = std::max<std::size_t>(bytes, 1);
  std::lock_guard lock(mutex_);
  if (size > capacity_ - used_) {
    throw OutOfMemory("out of memory on " + name_ + ": tried to allocate " + format_byte_size(bytes) + "; capacity " +
                          format_byte_size(capacity_) + ", " + format_byte_size(capacity_ - used_) + " free",
                      bytes);
  }
  // First fit in the holes left by earlier frees keeps addresses reproducible and compact.
  for (auto it = holes_.begin(); it != holes_.end(); ++it) {
    const std::uintptr_t start = (it->first + alignment - 1) & ~(std::uintptr_t{alignment} - 1);
    const std::uintptr_t end = it->first + it->second;
    if (start >= it->first && start <= end && end - start >= size) {
      const std::uintptr_t hole = it->first;
      holes_.erase(it);
      if (start > hole) holes_.emplace(hole, start - hole);
      if (end > start + size) holes_.emplace(start + size, end - start - size);
      live_.emplace(start, size);
      used_ += size;
      return reinterpret_cast<void*>(start);
    }
  }
  const std::uintptr_t start = (next_ + alignment - 1) & ~(std::uintptr_t{alignment} - 1);
  if (start > next_) holes_.emplace(next_, start - next_);
  next_ = start + size;
  live_.emplace(start, size);
  used_ += size;
  return reinterpret_cast<void*>(start);
}

void SimulatedResource::do_deallocate(void* p, std::size_t, std::size_t, StreamId) {
  if (p == nullptr) return;
  std::lock_guard lock(mutex_);
  auto it = live_.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == live_.end()) {
    throw std::invalid_argument("SimulatedResource " + name_ + ": deallocate of an address it did not hand out");
  }
  std::uintptr_t start = it->first;
  std::size_t size = it->second;
  used_ -= size;
  live_.erase(it);
  // Merge with neighbouring holes; a hole touching the bump pointer gives the space back to it.
  auto next = holes_.lower_bound(start);
  if (next != holes_.end() && next->first == start + size) {
    size += next->second;
    next = holes_.erase(next);
  }
  if (next != holes_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      holes_.erase(prev);
    }
  }
  if (start + size == next_) {
    next_ = start;
  } else {
    holes_.emplace(start, size);
  }
}

}  // namespace memtrain::memory
