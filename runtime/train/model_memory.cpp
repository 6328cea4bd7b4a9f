#include "runtime/train/model_memory.hpp"

#include <stdexcept>
#include <utility>

#include "memory/host_resource.hpp"
#include "memory/host_virtual_memory_resource.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::train {

std::shared_ptr<memory::CachingAllocator> make_model_allocator(const MemoryConfig& config) {
  memory::AllocatorOptions options;
  options.policy = config.policy;
  options.max_split_size = config.max_split_size;
  options.garbage_collection_threshold = config.garbage_collection_threshold;
  options.expandable_segments = config.expandable_segments;
  options.capacity = config.capacity;
  // vmm_stitch and expandable segments map pages into reserved address ranges: on the host that
  // is memfd + mmap (HostVirtualMemoryResource); every other policy takes plain aligned memory.
  const bool needs_vmm = options.policy == "vmm_stitch" || options.expandable_segments;
  try {
    std::shared_ptr<memory::MemoryResource> upstream;
    if (needs_vmm) {
      upstream = std::make_shared<memory::HostVirtualMemoryResource>();
    } else {
      upstream = std::make_shared<memory::HostResource>();
    }
    return std::make_shared<memory::CachingAllocator>(std::move(upstream), options);
  } catch (const std::invalid_argument& e) {
    throw ConfigError("memory.policy = " + config.policy + ": " + e.what());
  }
}

}  // namespace memtrain::train
