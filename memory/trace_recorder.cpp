#include "memory/trace_recorder.hpp"

namespace memtrain::memory {

void TraceRecorder::record(const TraceEvent& event) {
  std::lock_guard lock(mutex_);
  events_.push_back(event);
}

TraceEventSink TraceRecorder::sink() {
  return [this](const TraceEvent& event) { record(event); };
}

std::vector<TraceEvent> TraceRecorder::events() const {
  std::lock_guard lock(mutex_);
  return events_;
}

std::size_t TraceRecorder::size() const {
  std::lock_guard lock(mutex_);
  return events_.size();
}

void TraceRecorder::clear() {
  std::lock_guard lock(mutex_);
  events_.clear();
}

}  // namespace memtrain::memory
