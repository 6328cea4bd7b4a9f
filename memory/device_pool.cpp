#include "memory/device_pool.hpp"

#include <algorithm>
#include <stdexcept>

#include "memory/byte_size.hpp"
#include "memory/out_of_memory.hpp"

namespace memtrain::memory {

std::size_t DevicePool::add_device(DeviceSpec spec, std::shared_ptr<Allocator> allocator) {
  if (!allocator) throw std::invalid_argument("DevicePool: device '" + spec.name + "' has no allocator");
  if (spec.capacity_bytes == 0) {
    throw std::invalid_argument("DevicePool: device '" + spec.name + "' has capacity 0 bytes; expected > 0");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& d : devices_) {
    if (d->spec.name == spec.name) throw std::invalid_argument("DevicePool: device '" + spec.name + "' added twice");
  }
  devices_.push_back(std::make_shared<Device>(Device{std::move(spec), std::move(allocator)}));
  return devices_.size() - 1;
}

std::vector<std::shared_ptr<DevicePool::Device>> DevicePool::snapshot_devices() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return devices_;
}

std::size_t DevicePool::free_bytes(const Device& d, const MemoryStats& s) {
  const std::size_t allocated = static_cast<std::size_t>(std::max<std::int64_t>(0, s.allocated_bytes.current));
  return d.spec.capacity_bytes - std::min(allocated, d.spec.capacity_bytes);
}

namespace {
struct Candidate {
  std::size_t index;
  int priority;
  std::size_t free;
};

// Note [Placement: priority, then free memory] in device_pool.hpp.
void order_candidates(std::vector<Candidate>& c) {
  std::stable_sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) {
    if (a.priority != b.priority) return a.priority > b.priority;
    return a.free > b.free;
  });
}
}  // namespace

std::vector<std::size_t> DevicePool::placement_order() const {
  auto devices = snapshot_devices();
  std::vector<Candidate> c;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    c.push_back({i, devices[i]->spec.priority, free_bytes(*devices[i], devices[i]->allocator->stats())});
  }
  order_candidates(c);
  std::vector<std::size_t> order;
  for (const auto& x : c) order.push_back(x.index);
  return order;
}

PooledBlock DevicePool::allocate(std::size_t bytes, StreamId stream, TagId tag) {
  auto devices = snapshot_devices();
  if (devices.empty()) throw std::logic_error("DevicePool: allocate on a pool with no devices");
  std::vector<Candidate> c;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    c.push_back({i, devices[i]->spec.priority, free_bytes(*devices[i], devices[i]->allocator->stats())});
  }
  order_candidates(c);
  std::string why;
  for (const Candidate& cand : c) {
    const Device& d = *devices[cand.index];
    if (cand.free < bytes) {
      why += "; " + d.spec.name + ": " + format_byte_size(cand.free) + " free";
      continue;
    }
    try {
      return PooledBlock{cand.index, d.allocator->allocate(bytes, stream, tag)};
    } catch (const OutOfMemory& e) {
      why += "; " + d.spec.name + ": " + e.what();
    }
  }
  throw OutOfMemory("out of memory on every device of the pool: tried to allocate " + format_byte_size(bytes) + why,
                    bytes);
}

void DevicePool::deallocate(const PooledBlock& block) {
  std::shared_ptr<Device> d;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (block.device >= devices_.size()) {
      throw std::out_of_range("DevicePool: deallocate on device " + std::to_string(block.device) + " of a pool with " +
                              std::to_string(devices_.size()) + " devices");
    }
    d = devices_[block.device];
  }
  d->allocator->deallocate(block.block);
}

std::size_t DevicePool::num_devices() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return devices_.size();
}

Allocator& DevicePool::allocator(std::size_t device) {
  std::lock_guard<std::mutex> lock(mutex_);
  return *devices_.at(device)->allocator;
}

std::vector<DeviceStats> DevicePool::stats() const {
  std::vector<DeviceStats> out;
  for (const auto& d : snapshot_devices()) {
    MemoryStats s = d->allocator->stats();
    out.push_back(DeviceStats{d->spec.name, d->spec.priority, d->spec.capacity_bytes, free_bytes(*d, s), s});
  }
  return out;
}

}  // namespace memtrain::memory
