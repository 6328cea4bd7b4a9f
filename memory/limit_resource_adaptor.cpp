#include "memory/limit_resource_adaptor.hpp"

#include <algorithm>
#include <stdexcept>

#include "memory/byte_size.hpp"
#include "memory/out_of_memory.hpp"

namespace memtrain::memory {
namespace {

// Bytes an allocation occupies: its size rounded up to the alignment; SIZE_MAX when that
// overflows (which no limit admits).
std::size_t charge(std::size_t bytes, std::size_t alignment) {
  if (alignment <= 1) return bytes;
  if (bytes > SIZE_MAX - (alignment - 1)) return SIZE_MAX;
  return (bytes + alignment - 1) / alignment * alignment;
}

}  // namespace

LimitResourceAdaptor::LimitResourceAdaptor(std::shared_ptr<MemoryResource> upstream, std::size_t limit_bytes)
    : upstream_(std::move(upstream)), limit_(limit_bytes) {
  if (!upstream_) throw std::invalid_argument("LimitResourceAdaptor: upstream is null");
}

std::size_t LimitResourceAdaptor::capacity_bytes() const {
  const std::size_t up = upstream_->capacity_bytes();
  return up == 0 ? limit_ : std::min(up, limit_);
}

std::string LimitResourceAdaptor::name() const {
  return upstream_->name() + " (limit " + format_byte_size(limit_) + ")";
}

void* LimitResourceAdaptor::do_allocate(std::size_t bytes, std::size_t alignment, StreamId stream) {
  const std::size_t cost = charge(bytes, alignment);
  std::size_t used = used_.load(std::memory_order_relaxed);
  do {
    if (cost > limit_ - std::min(limit_, used)) {
      throw OutOfMemory("out of memory on " + name() + ": tried to allocate " + format_byte_size(bytes) + "; " +
                            format_byte_size(used) + " of the limit in use, " +
                            format_byte_size(limit_ - std::min(limit_, used)) + " left",
                        bytes);
    }
  } while (!used_.compare_exchange_weak(used, used + cost, std::memory_order_relaxed));
  try {
    return upstream_->allocate(bytes, alignment, stream);
  } catch (...) {
    used_.fetch_sub(cost, std::memory_order_relaxed);
    throw;
  }
}

void LimitResourceAdaptor::do_deallocate(void* p, std::size_t bytes, std::size_t alignment, StreamId stream) {
  upstream_->deallocate(p, bytes, alignment, stream);
  used_.fetch_sub(charge(bytes, alignment), std::memory_order_relaxed);
}

}  // namespace memtrain::memory
