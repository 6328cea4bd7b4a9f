#pragma once
// The allocator behind every tensor of a training run (design.md, "Memory subsystem").
#include <memory>

#include "memory/caching_allocator.hpp"
#include "runtime/train/config.hpp"

namespace memtrain::train {

// A memory::CachingAllocator over memory::HostResource (HostVirtualMemoryResource for
// vmm_stitch and expandable_segments) with the memory.* options (policy,
// max_split_size, garbage_collection_threshold, expandable_segments, capacity).
// Throws ConfigError naming memory.policy when the allocator refuses the options (an unknown
// policy, options that would do nothing, a virtual-memory policy on a host without one).
std::shared_ptr<memory::CachingAllocator> make_model_allocator(const MemoryConfig& config);

}  // namespace memtrain::train
