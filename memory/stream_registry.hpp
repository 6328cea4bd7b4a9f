#pragma once
// Logical streams and their completion events on CPU.
//
// A stream is a queue of work that completes in order (a cudaStream_t on CUDA). On CPU, work is
// done synchronously by the caller, but a stream still "owns" memory until its owner says the
// work using it is done: complete(stream) or synchronize(stream). Events mark a point in a
// stream; an event is complete once the stream's completed point has reached it (CUDA event
// semantics: cudaEventRecord / cudaEventQuery / cudaEventSynchronize).
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "memory/types.hpp"

namespace memtrain::memory {

// A point in a stream's work: complete once `sequence` work items have completed on `stream`.
struct StreamEvent {
  StreamId stream = kDefaultStream;
  std::uint64_t sequence = 0;
};

// Thread-safe. Any StreamId is valid; a stream springs into existence on first use with nothing
// outstanding. Stream 0 (kDefaultStream) always exists. The four calls the caching allocator
// makes (record_event, query, both synchronize) are virtual: CudaStreamRegistry
// (memory/cuda_stream_registry.hpp) answers them with real CUDA streams and events.
class StreamRegistry {
 public:
  virtual ~StreamRegistry() = default;
  // A stream id not handed out before by this registry (never 0).
  StreamId create_stream();
  // Marks the current end of `stream`'s work and returns an event for it. The event is
  // outstanding until that work completes.
  virtual StreamEvent record_event(StreamId stream);
  // True when the work the event marks has completed (cudaEventQuery == cudaSuccess).
  virtual bool query(const StreamEvent& event) const;
  // The owner reports that all work recorded on `stream` so far has completed.
  void complete(StreamId stream);
  // Waits until the event completes. On CPU the work is already done by the time anyone
  // waits (it runs synchronously), so waiting completes the stream up to the event: this is
  // what the allocator's retry path uses (PyTorch synchronizes outstanding events before it
  // gives up). Counted in num_synchronizations().
  virtual void synchronize(const StreamEvent& event);
  // Completes everything recorded on the stream (cudaStreamSynchronize).
  virtual void synchronize(StreamId stream);
  // Events recorded on `stream` that have not completed.
  std::uint64_t outstanding(StreamId stream) const;
  std::uint64_t num_synchronizations() const;

 private:
  struct State {
    std::uint64_t recorded = 0;
    std::uint64_t completed = 0;
  };
  mutable std::mutex mutex_;
  std::unordered_map<StreamId, State> streams_;
  StreamId next_stream_ = 1;
  std::uint64_t num_synchronizations_ = 0;
};

// The registry of this process, used by allocators unless they are given another one.
StreamRegistry& stream_registry();

}  // namespace memtrain::memory
