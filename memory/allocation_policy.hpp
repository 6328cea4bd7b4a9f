#pragma once
// The rules a CachingAllocator follows; the allocator does the bookkeeping. One policy per
// file, each with a Note block giving its reasoning and its registration
// (allocation_policy_registry.hpp lists them): no_cache_policy.cpp, pytorch_policy.cpp,
// best_fit_policy.cpp, vmm_stitch_policy.cpp.
#include <cstddef>
#include <memory>
#include <string_view>

#include "memory/allocator_options.hpp"

namespace memtrain::memory {

// Requests are served from one of two pools so small tensors never pin large segments.
enum class Pool : unsigned char { small = 0, large = 1 };

// The decisions that distinguish one caching policy from another (PyTorch's
// CUDACachingAllocator rules, best fit, virtual-memory stitching, no cache): how a request is
// rounded, which pool serves it, how large a new segment is, whether a cached block may serve a
// request and be split. The CachingAllocator asks; the policy holds no state beyond its options,
// so one policy object serves every stream. Sizes are bytes.
class AllocationPolicy {
 public:
  virtual ~AllocationPolicy() = default;
  virtual std::string_view name() const = 0;

  // Block size for a request of `bytes` (> 0), a multiple of 256. Returns 0 when rounding would
  // not fit in std::size_t (the allocator then reports OutOfMemory instead of wrapping).
  virtual std::size_t round_size(std::size_t bytes) const = 0;
  virtual Pool pool_for(std::size_t rounded) const = 0;
  // Bytes to ask the upstream for when no cached block fits `rounded` (>= rounded; 0 on overflow).
  virtual std::size_t segment_size(std::size_t rounded) const = 0;
  // May a free block of `block_size` serve a request of `rounded`? (max_split_size rules.)
  virtual bool may_serve(Pool pool, std::size_t block_size, std::size_t rounded) const = 0;
  // Split `block_size` to serve `rounded`, leaving the rest free?
  virtual bool should_split(Pool pool, std::size_t block_size, std::size_t rounded) const = 0;

  // False: freed blocks go straight back to the upstream.
  virtual bool caches() const { return true; }
  // Take over other streams' whole free segments before releasing them upstream.
  virtual bool reclaims_other_streams() const { return false; }
  // Before a new segment would raise peak reserved memory, give cached whole segments back.
  virtual bool holds_peak() const { return false; }
  // Segments are made of mapped pages, and free pages can be stitched into a new range.
  virtual bool stitches() const { return false; }
};

// The policy registered as options.policy (allocation_policy_registry.hpp). `granularity` is
// the page size in bytes of a virtual-memory upstream (0 when the upstream is not one). Throws
// std::invalid_argument for an unknown name, listing the registered ones, and when the policy
// cannot run on that upstream (vmm_stitch without pages).
std::unique_ptr<AllocationPolicy> make_policy(const AllocatorOptions& options, std::size_t granularity);

// Round `x` up to a multiple of the power of two `m`; 0 when the result would not fit.
constexpr std::size_t round_up_checked(std::size_t x, std::size_t m) {
  if (x > SIZE_MAX - (m - 1)) return 0;
  return (x + m - 1) & ~(m - 1);
}

}  // namespace memtrain::memory
