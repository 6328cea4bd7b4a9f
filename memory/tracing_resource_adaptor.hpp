#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "memory/memory_resource.hpp"
#include "memory/trace_event.hpp"

namespace memtrain::memory {

// Reports every call that reaches an upstream as a TraceEvent (what an allocator asked of its
// device): segment_alloc after a successful allocate, segment_free after deallocate, oom when
// the upstream threw memtrain::OutOfMemory (then rethrown). Events carry the steady-clock time,
// the bytes the caller passed, the address, the stream, the tag given at construction and an
// id shared by an allocation and its free (1, 2, ... in allocation order). The sink is called
// synchronously, under the adaptor's lock. Thread-safe, if the upstream is.
class TracingResourceAdaptor final : public MemoryResource {
 public:
  // Throws std::invalid_argument for a null upstream or an empty sink.
  TracingResourceAdaptor(std::shared_ptr<MemoryResource> upstream, TraceEventSink sink, TagId tag = kUntagged);

  std::size_t capacity_bytes() const override { return upstream_->capacity_bytes(); }
  std::string name() const override { return upstream_->name(); }
  bool backs_memory() const override { return upstream_->backs_memory(); }
  MemoryResource& upstream() const { return *upstream_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, StreamId stream) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, StreamId stream) override;
  void emit(TraceEventKind kind, std::size_t bytes, std::uintptr_t address, StreamId stream, std::uint64_t id);

  std::shared_ptr<MemoryResource> upstream_;
  TraceEventSink sink_;
  TagId tag_;
  std::mutex mutex_;
  std::uint64_t next_id_ = 1;
  std::unordered_map<std::uintptr_t, std::uint64_t> ids_;  // live address -> id
};

}  // namespace memtrain::memory
