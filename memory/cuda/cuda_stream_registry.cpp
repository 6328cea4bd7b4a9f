#include "memory/cuda_stream_registry.hpp"

#include <stdexcept>
#include <string>

#include "memory/cuda_error.hpp"

namespace memtrain::memory {

CudaStreamRegistry::~CudaStreamRegistry() {
  for (auto& [key, event] : events_) cudaEventDestroy(event);
}

StreamId CudaStreamRegistry::add(cudaStream_t stream) {
  std::lock_guard lock(mutex_);
  const StreamId id = next_++;
  streams_.emplace(id, stream);
  return id;
}

cudaStream_t CudaStreamRegistry::stream(StreamId id) const {
  std::lock_guard lock(mutex_);
  const auto it = streams_.find(id);
  if (it == streams_.end()) {
    throw std::out_of_range("CudaStreamRegistry: stream " + std::to_string(id) + " was never added");
  }
  return it->second;
}

StreamEvent CudaStreamRegistry::record_event(StreamId id) {
  const cudaStream_t s = stream(id);
  cudaEvent_t event = nullptr;
  // No timing: the cheapest event, and the only kind cudaEventQuery needs.
  check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  if (const cudaError_t err = cudaEventRecord(event, s); err != cudaSuccess) {
    cudaEventDestroy(event);
    check_cuda(err, "cudaEventRecord");
  }
  std::lock_guard lock(mutex_);
  const std::uint64_t sequence = ++recorded_[id];
  events_.emplace(std::make_pair(id, sequence), event);
  return StreamEvent{id, sequence};
}

bool CudaStreamRegistry::query(const StreamEvent& e) const {
  std::lock_guard lock(mutex_);
  const auto it = events_.find({e.stream, e.sequence});
  if (it == events_.end()) return true;
  const cudaError_t err = cudaEventQuery(it->second);
  if (err == cudaErrorNotReady) {
    cudaGetLastError();  // not an error: clear it so later calls do not report it
    return false;
  }
  check_cuda(err, "cudaEventQuery");
  cudaEventDestroy(it->second);
  events_.erase(it);
  return true;
}

void CudaStreamRegistry::synchronize(const StreamEvent& e) {
  cudaEvent_t event = nullptr;
  {
    std::lock_guard lock(mutex_);
    const auto it = events_.find({e.stream, e.sequence});
    if (it == events_.end()) return;
    event = it->second;
    events_.erase(it);
  }
  const cudaError_t err = cudaEventSynchronize(event);
  cudaEventDestroy(event);
  check_cuda(err, "cudaEventSynchronize");
}

void CudaStreamRegistry::synchronize(StreamId id) {
  check_cuda(cudaStreamSynchronize(stream(id)), "cudaStreamSynchronize");
}

std::size_t CudaStreamRegistry::outstanding_events() const {
  std::lock_guard lock(mutex_);
  return events_.size();
}

}  // namespace memtrain::memory
