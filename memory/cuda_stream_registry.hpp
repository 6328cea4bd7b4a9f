#pragma once
// The caching allocator's streams and events on real CUDA streams and events. Compiled only
// when nvcc was found (MEMTRAIN_HAVE_CUDA).
#include "memory/cuda_error.hpp"

#if MEMTRAIN_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "memory/stream_registry.hpp"

namespace memtrain::memory {

// A StreamRegistry whose StreamIds name CUDA streams: record_event is cudaEventRecord on that
// stream, query is cudaEventQuery, synchronize is cudaEventSynchronize / cudaStreamSynchronize
// (PyTorch's CUDACachingAllocator semantics: a block freed after record_stream on another stream
// returns to the pool once an event recorded on that stream at the free has completed).
// kDefaultStream is the legacy default stream. The registry does not own the streams it is
// given (their owner destroys them after the allocator is done); it owns its events and
// destroys those still outstanding. Thread-safe. CUDA failures throw CudaError naming the call.
class CudaStreamRegistry final : public StreamRegistry {
 public:
  CudaStreamRegistry() = default;
  ~CudaStreamRegistry() override;
  CudaStreamRegistry(const CudaStreamRegistry&) = delete;
  CudaStreamRegistry& operator=(const CudaStreamRegistry&) = delete;

  // Registers `stream` under a new id (never kDefaultStream).
  StreamId add(cudaStream_t stream);
  // The CUDA stream of `id`; throws std::out_of_range for an id not handed out here.
  cudaStream_t stream(StreamId id) const;

  StreamEvent record_event(StreamId stream) override;
  bool query(const StreamEvent& event) const override;
  void synchronize(const StreamEvent& event) override;
  void synchronize(StreamId stream) override;
  // Events recorded and not yet seen complete.
  std::size_t outstanding_events() const;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<StreamId, cudaStream_t> streams_{{kDefaultStream, nullptr}};
  std::unordered_map<StreamId, std::uint64_t> recorded_;
  // Outstanding events by (stream, sequence); an event seen complete is destroyed and erased,
  // so a StreamEvent missing here has completed.
  mutable std::map<std::pair<StreamId, std::uint64_t>, cudaEvent_t> events_;
  StreamId next_ = 1;
};

}  // namespace memtrain::memory
#endif  // MEMTRAIN_HAVE_CUDA
