#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "memory/types.hpp"

namespace memtrain::memory {

// An upstream source of memory: host, simulated device, CUDA, virtual memory...
// Contract (modelled on std::pmr::memory_resource and RMM's device_memory_resource):
// allocate returns memory aligned to `alignment` (a power of two) or throws OutOfMemory
// (memory/out_of_memory.hpp); deallocate takes exactly the pointer, size, alignment and
// stream that allocate was given. Resources are not required to be thread-safe unless they say so.
class MemoryResource {
 public:
  virtual ~MemoryResource() = default;

  void* allocate(std::size_t bytes, std::size_t alignment = 256, StreamId stream = kDefaultStream) {
    return do_allocate(bytes, alignment, stream);
  }
  void deallocate(void* p, std::size_t bytes, std::size_t alignment = 256, StreamId stream = kDefaultStream) {
    do_deallocate(p, bytes, alignment, stream);
  }

  // Bytes this resource can hand out in total; 0 when unknown/unbounded (host).
  virtual std::size_t capacity_bytes() const { return 0; }
  // Bytes this resource could hand out right now, counting what others sharing the device hold
  // (a quota adaptor over a shared ledger); SIZE_MAX when it cannot say (then capacity_bytes()
  // less what this caller reserved is the best guess).
  virtual std::size_t available_bytes() const { return SIZE_MAX; }
  // Short human-readable name used in messages ("host", "simulated a100-40gb", "cuda:0").
  virtual std::string name() const = 0;
  // True when the pointers refer to real, touchable memory (false for simulated resources).
  virtual bool backs_memory() const { return true; }

 private:
  virtual void* do_allocate(std::size_t bytes, std::size_t alignment, StreamId stream) = 0;
  virtual void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, StreamId stream) = 0;
};

}  // namespace memtrain::memory
