#pragma once
// Options of the CachingAllocator, and their environment-variable form MEMTRAIN_ALLOC_CONF.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace memtrain::memory {

// Sentinel of AllocatorOptions::max_split_size: "unset", every block may be split (PyTorch's
// default, where max_split_size is SIZE_MAX as well).
inline constexpr std::size_t kMaxSplitSizeUnset = SIZE_MAX;

struct AllocatorOptions {
  // A registered policy's name (allocation_policy_registry.hpp).
  std::string policy = "best_fit";
  // Blocks of this size (bytes) or more are never split and serve only requests of at least
  // this size (PyTorch's max_split_size_mb). kMaxSplitSizeUnset when unset.
  std::size_t max_split_size = kMaxSplitSizeUnset;
  // 0 (off) or in (0, 1): when reserved bytes would exceed this fraction of the capacity, cached
  // unused segments are released first (PyTorch's garbage_collection_threshold).
  double garbage_collection_threshold = 0.0;
  // Segments are virtual address ranges that grow in place by mapping more pages (PyTorch's
  // expandable_segments). Needs a VirtualMemoryResource upstream.
  bool expandable_segments = false;
  // Most bytes the allocator may reserve from its upstream; 0 = the upstream's capacity.
  std::size_t capacity = 0;
};

// Parses MEMTRAIN_ALLOC_CONF: `key:value,key:value`, the syntax of PYTORCH_CUDA_ALLOC_CONF.
// Keys: policy (a registered policy's name), max_split_size_mb (integer MiB, > 20 as in PyTorch),
// garbage_collection_threshold (0 < x < 1), expandable_segments (True/False/true/false/1/0),
// capacity (a byte size: "40GiB", "512MiB", "1073741824"). Whitespace around keys and values is
// ignored; an empty string gives the defaults. Throws std::invalid_argument naming the key,
// the value and what was expected for: an unknown key, a key given twice, a missing ':', a bad
// value, and an option combination that would do nothing (validate_options).
AllocatorOptions parse_alloc_conf(std::string_view conf);
// The same, starting from `base` (e.g. the config file's memory.* keys): keys present in `conf`
// override base's values; the result is validated as a whole.
AllocatorOptions parse_alloc_conf(std::string_view conf, AllocatorOptions base);
// `base` overridden by the environment variable MEMTRAIN_ALLOC_CONF when it is set (as PyTorch
// users set PYTORCH_CUDA_ALLOC_CONF). Throws std::invalid_argument as parse_alloc_conf does.
AllocatorOptions apply_alloc_conf_environment(AllocatorOptions base);

// Passed as upstream_capacity when the device is not known yet (parse_alloc_conf).
inline constexpr std::size_t kUpstreamCapacityUnknown = SIZE_MAX;

// Rejects option combinations that would silently do nothing, with the reason: an unknown
// policy (listing the registered ones); a threshold outside 0 or (0, 1); options the policy
// refuses (its registration's validate: no_cache refuses max_split_size, a
// garbage_collection_threshold and expandable_segments, since nothing is cached or split); a
// threshold with no limit to measure it against (no `capacity` and an unbounded upstream:
// `upstream_capacity` == 0). Throws std::invalid_argument.
void validate_options(const AllocatorOptions& options, std::size_t upstream_capacity);

// Whether the allocator needs a VirtualMemoryResource upstream for these options: the policy
// maps pages (vmm_stitch) or expandable_segments is set. False for an unknown policy, which
// validate_options refuses.
bool needs_virtual_memory(const AllocatorOptions& options);

// The options as MEMTRAIN_ALLOC_CONF text (round-trips through parse_alloc_conf).
std::string to_alloc_conf(const AllocatorOptions& options);

}  // namespace memtrain::memory
