#pragma once
#include <cstddef>
#include <string>

#include "memory/memory_stats.hpp"
#include "memory/types.hpp"

namespace memtrain::memory {

// What the rest of memtrain allocates through (runtime/core's tensors, comms buffers).
// The CachingAllocator (caching_allocator.hpp) is the implementation; the interface exists so
// upper layers depend on the contract, not on a policy.
class Allocator {
 public:
  virtual ~Allocator() = default;

  // A block of at least `bytes` bytes, 256-byte aligned, usable on `stream`, accounted under
  // `tag`. bytes == 0 gives a Block with ptr == nullptr. Throws OutOfMemory.
  virtual Block allocate(std::size_t bytes, StreamId stream = kDefaultStream, TagId tag = kUntagged) = 0;
  // Returns a block obtained from allocate(). A null block is ignored.
  virtual void deallocate(const Block& block) = 0;
  // Marks `block` as used by `stream` too: after deallocate it becomes reusable only once
  // that stream's outstanding work completes (PyTorch's record_stream semantics).
  virtual void record_stream(const Block& block, StreamId stream) = 0;

  virtual MemoryStats stats() const = 0;
  virtual void reset_peak_stats() = 0;
  // A readable table of the stats (like torch.cuda.memory_summary()).
  virtual std::string memory_summary() const = 0;
  // Releases cached, unused segments to the upstream (torch.cuda.empty_cache()).
  virtual void empty_cache() = 0;
};

}  // namespace memtrain::memory
