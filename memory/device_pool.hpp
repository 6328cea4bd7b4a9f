#pragma once
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "memory/allocator.hpp"
#include "memory/memory_stats.hpp"
#include "memory/types.hpp"

namespace memtrain::memory {

// How a device joins a DevicePool.
struct DeviceSpec {
  std::string name;                // "cuda:0", "sim-a100-0", ...; unique in the pool
  int priority = 0;                // higher is preferred
  std::size_t capacity_bytes = 0;  // what its allocator may hold at most (> 0)
};

// A block and the device (index in the pool) it came from.
struct PooledBlock {
  std::size_t device = 0;
  Block block;
};

// One device's numbers, as DevicePool::stats() reports them.
struct DeviceStats {
  std::string name;
  int priority = 0;
  std::size_t capacity_bytes = 0;
  std::size_t free_bytes = 0;  // capacity - allocated_bytes.current (cached bytes count as free)
  MemoryStats stats;
};

// Several devices, each an Allocator over its own resource, behind one pool.
//
// Note [Placement: priority, then free memory]
// A request goes to the device with the highest priority; among devices of equal priority,
// to the one with the most free memory (capacity minus allocated bytes: what a device has
// cached it can reuse or release, so it counts as free), ties broken by the order devices
// were added. Priority first, because it is how the operator says "use the fast device until
// it is full"; free memory second, because it spreads load and leaves every device the most
// room for its largest next request. A device that cannot hold the request at all (free below
// it) is skipped; one whose allocator throws OutOfMemory (fragmentation) passes the request
// on to the next candidate. Only when every device fails does the pool throw.
//
// Thread-safe: devices may be added while others allocate; allocators must be thread-safe
// themselves (CachingAllocator is).
class DevicePool {
 public:
  // Adds a device and returns its index. Throws std::invalid_argument for a null allocator,
  // capacity 0, or a name already in the pool.
  std::size_t add_device(DeviceSpec spec, std::shared_ptr<Allocator> allocator);

  // Places the request (Note [Placement: priority, then free memory]). bytes == 0 gives a null
  // block on the first candidate device. Throws memtrain::OutOfMemory listing every device
  // and why it could not serve the request; std::logic_error on an empty pool.
  PooledBlock allocate(std::size_t bytes, StreamId stream = kDefaultStream, TagId tag = kUntagged);
  // Returns the block to its device. Throws std::out_of_range for a device index not in the pool.
  void deallocate(const PooledBlock& block);

  std::size_t num_devices() const;
  Allocator& allocator(std::size_t device);
  std::vector<DeviceStats> stats() const;
  // The order allocate would try the devices in now (indices).
  std::vector<std::size_t> placement_order() const;

 private:
  struct Device {
    DeviceSpec spec;
    std::shared_ptr<Allocator> allocator;
  };
  std::vector<std::shared_ptr<Device>> snapshot_devices() const;
  static std::size_t free_bytes(const Device& d, const MemoryStats& s);

  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<Device>> devices_;
};

}  // namespace memtrain::memory
