#pragma once
// The allocator options of a Config: from MEMTRAIN_ALLOC_CONF, and to memory::AllocatorOptions.
#include <string>

#include "memory/allocator_options.hpp"
#include "runtime/config/config.hpp"

namespace memtrain::train {

// Applies MEMTRAIN_ALLOC_CONF (`key:value,...`, PYTORCH_CUDA_ALLOC_CONF syntax, parsed by
// memory::parse_alloc_conf) over the memory section: each key it names replaces the config's
// value (policy, max_split_size_mb, garbage_collection_threshold, expandable_segments,
// capacity); keys it does not name keep theirs. The string must be valid on its own. Throws
// ConfigError "MEMTRAIN_ALLOC_CONF=<conf>: <what>; expected <...>".
void apply_alloc_conf(Config& config, const std::string& conf);

// The memory section as the CachingAllocator's options.
memory::AllocatorOptions allocator_options(const MemoryConfig& memory);

}  // namespace memtrain::train
