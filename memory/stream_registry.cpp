#include "memory/stream_registry.hpp"

#include <algorithm>

namespace memtrain::memory {

StreamId StreamRegistry::create_stream() {
  std::lock_guard lock(mutex_);
  while (streams_.count(next_stream_) != 0 || next_stream_ == kDefaultStream) ++next_stream_;
  const StreamId id = next_stream_++;
  streams_.emplace(id, State{});
  return id;
}

StreamEvent StreamRegistry::record_event(StreamId stream) {
  std::lock_guard lock(mutex_);
  State& s = streams_[stream];
  return StreamEvent{stream, ++s.recorded};
}

bool StreamRegistry::query(const StreamEvent& event) const {
  std::lock_guard lock(mutex_);
  auto it = streams_.find(event.stream);
  return it == streams_.end() || it->second.completed >= event.sequence;
}

void StreamRegistry::complete(StreamId stream) {
  std::lock_guard lock(mutex_);
  State& s = streams_[stream];
  s.completed = s.recorded;
}

void StreamRegistry::synchronize(const StreamEvent& event) {
  std::lock_guard lock(mutex_);
  State& s = streams_[event.stream];
  if (s.completed < event.sequence) {
    s.completed = std::min(event.sequence, s.recorded);
    ++num_synchronizations_;
  }
}

void StreamRegistry::synchronize(StreamId stream) {
  std::lock_guard lock(mutex_);
  State& s = streams_[stream];
  if (s.completed < s.recorded) {
    s.completed = s.recorded;
    ++num_synchronizations_;
  }
}

std::uint64_t StreamRegistry::outstanding(StreamId stream) const {
  std::lock_guard lock(mutex_);
  auto it = streams_.find(stream);
  return it == streams_.end() ? 0 : it->second.recorded - it->second.completed;
}

std::uint64_t StreamRegistry::num_synchronizations() const {
  std::lock_guard lock(mutex_);
  return num_synchronizations_;
}

StreamRegistry& stream_registry() {
  static StreamRegistry registry;
  return registry;
}

}  // namespace memtrain::memory
