#include "memory/tracing_resource_adaptor.hpp"

#include <chrono>
#include <stdexcept>

#include "memory/out_of_memory.hpp"

namespace memtrain::memory {

TracingResourceAdaptor::TracingResourceAdaptor(std::shared_ptr<MemoryResource> upstream, TraceEventSink sink, TagId tag)
    : upstream_(std::move(upstream)), sink_(std::move(sink)), tag_(tag) {
  if (!upstream_) throw std::invalid_argument("TracingResourceAdaptor: upstream is null");
  if (!sink_) throw std::invalid_argument("TracingResourceAdaptor: sink is empty");
}

void TracingResourceAdaptor::emit(TraceEventKind kind, std::size_t bytes, std::uintptr_t address, StreamId stream,
                                  std::uint64_t id) {
  TraceEvent e;
  e.kind = kind;
  e.time_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
  e.bytes = bytes;
  e.address = address;
  e.stream = stream;
  e.tag = tag_;
  e.allocation_id = id;
  sink_(e);
}

void* TracingResourceAdaptor::do_allocate(std::size_t bytes, std::size_t alignment, StreamId stream) {
  void* p = nullptr;
  try {
    p = upstream_->allocate(bytes, alignment, stream);
  } catch (const OutOfMemory&) {
    std::lock_guard lock(mutex_);
    emit(TraceEventKind::oom, bytes, 0, stream, 0);
    throw;
  }
  std::lock_guard lock(mutex_);
  const std::uint64_t id = next_id_++;
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  if (p != nullptr) ids_[address] = id;
  emit(TraceEventKind::segment_alloc, bytes, address, stream, id);
  return p;
}

void TracingResourceAdaptor::do_deallocate(void* p, std::size_t bytes, std::size_t alignment, StreamId stream) {
  upstream_->deallocate(p, bytes, alignment, stream);
  std::lock_guard lock(mutex_);
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::uint64_t id = 0;
  if (const auto it = ids_.find(address); it != ids_.end()) {
    id = it->second;
    ids_.erase(it);
  }
  emit(TraceEventKind::segment_free, bytes, address, stream, id);
}

}  // namespace memtrain::memory
