#pragma once
// One event of an allocator's life, as the tracing adaptor, trace export and replay see it.
#include <cstdint>
#include <functional>
#include <string_view>

#include "memory/types.hpp"

namespace memtrain::memory {

enum class TraceEventKind : std::uint8_t {
  alloc,          // a block handed to a caller
  free,           // a block returned by a caller (deallocate)
  segment_alloc,  // memory obtained from the upstream (a plain segment or physical pages)
  segment_free,   // memory returned to the upstream
  segment_map,    // pages mapped into a virtual range (expandable growth, stitching)
  segment_unmap,  // pages unmapped from a virtual range
  oom,            // a request that failed with OutOfMemory
  step,           // a training step boundary: allocation_id = steps completed (not an allocator
                  // event; the trainer records it, Note [Step boundaries in a trace])
};

// "alloc", "free", "segment_alloc", ... (the names the JSON and CSV exports use).
std::string_view to_string(TraceEventKind kind);

struct TraceEvent {
  TraceEventKind kind = TraceEventKind::alloc;
  std::uint64_t time_ns = 0;   // steady clock, nanoseconds
  std::uint64_t bytes = 0;     // block size (alloc/free: the size the caller asked for),
                               // segment bytes, or the failed request (oom)
  std::uintptr_t address = 0;  // block or segment address; 0 for oom
  StreamId stream = kDefaultStream;
  TagId tag = kUntagged;
  std::uint64_t allocation_id = 0;  // alloc/free: the same id for a block's alloc and free
                                    // (1, 2, ... per allocator); segments: the segment id;
                                    // step: the number of steps completed
};

// Receives every event, synchronously, under the allocator's lock: it must not call back into
// the allocator.
using TraceEventSink = std::function<void(const TraceEvent&)>;

}  // namespace memtrain::memory
