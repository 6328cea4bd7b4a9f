#pragma once
#include <cstddef>
#include <mutex>
#include <vector>

#include "memory/trace_event.hpp"

namespace memtrain::memory {

// Keeps the events an allocator (CachingAllocator::set_event_sink) or a TracingResourceAdaptor
// reports, in arrival order, for the exports (memory_snapshot_json.hpp, chrome_trace_json.hpp,
// trace_csv_writer.hpp). Thread-safe. The sink refers to this recorder, which must outlive
// every user of the sink.
class TraceRecorder {
 public:
  void record(const TraceEvent& event);
  TraceEventSink sink();
  std::vector<TraceEvent> events() const;
  std::size_t size() const;
  void clear();

 private:
  mutable std::mutex mutex_;
  std::vector<TraceEvent> events_;
};

}  // namespace memtrain::memory
