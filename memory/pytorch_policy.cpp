#include <memory>

#include "memory/allocation_policy.hpp"
#include "memory/allocation_policy_registry.hpp"

namespace memtrain::memory {
namespace {

constexpr std::size_t kMinBlockSize = 512;                   // every size is a multiple
constexpr std::size_t kSmallSize = std::size_t{1} << 20;     // largest "small" request
constexpr std::size_t kSmallBuffer = std::size_t{2} << 20;   // small-pool segment
constexpr std::size_t kLargeBuffer = std::size_t{20} << 20;  // mid-size segment
constexpr std::size_t kMinLargeAlloc = std::size_t{10} << 20;
constexpr std::size_t kRoundLarge = std::size_t{2} << 20;

// Note [pytorch: the documented CUDA caching allocator rules]
// Reproduces the rules of c10/cuda/CUDACachingAllocator.cpp as its documentation and Notes
// state them, so experiments compare against what PyTorch users live with:
// - sizes are rounded up to a multiple of 512 B (kMinBlockSize);
// - requests up to 1 MiB come from the small pool, whose segments are 2 MiB; larger requests
//   come from the large pool, where a request under 10 MiB gets a 20 MiB segment and anything
//   larger a segment rounded up to 2 MiB;
// - best fit: the smallest cached block of the same pool and stream that is large enough;
// - a block is split when the remainder is at least 512 B (small pool) or more than 1 MiB
//   (large pool); a smaller large-pool remainder stays attached to the block;
// - max_split_size: blocks of at least that size are never split and serve only requests of at
//   least that size that would waste less than 20 MiB (kLargeBuffer) of them;
// - on failure, cached whole (unsplit) segments of every stream are freed and the request
//   retried once, then OutOfMemory. There is no reclaiming of another stream's cached block
//   other than by returning it to the device and allocating again.
// What PyTorch does in issue case 3 (a new stream per 2 GiB request on a 4 GiB device): a new
// stream finds nothing cached on its own stream. Requests 1 and 2 get fresh segments; request 3
// fails on the device, and its retry frees both cached segments of the other streams (a
// cudaFree each, which synchronizes the device) before allocating afresh; request 4 fits beside
// it; request 5 retries again, and so on. Every request is served, but at the price of
// num_alloc_retries = 7, num_device_alloc = 16 and num_device_free = 14 for 16 requests, where
// best_fit reuses one segment throughout (StreamPerRequest tests in tests/memory pin both).
class PytorchPolicy final : public AllocationPolicy {
 public:
  explicit PytorchPolicy(std::size_t max_split_size) : max_split_size_(max_split_size) {}
  std::string_view name() const override { return "pytorch"; }
  std::size_t round_size(std::size_t bytes) const override {
    return bytes < kMinBlockSize ? kMinBlockSize : round_up_checked(bytes, kMinBlockSize);
  }
  Pool pool_for(std::size_t rounded) const override { return rounded <= kSmallSize ? Pool::small : Pool::large; }
  std::size_t segment_size(std::size_t rounded) const override {
    if (rounded <= kSmallSize) return kSmallBuffer;
    if (rounded < kMinLargeAlloc) return kLargeBuffer;
    return round_up_checked(rounded, kRoundLarge);
  }
  bool may_serve(Pool, std::size_t block_size, std::size_t rounded) const override {
    if (rounded < max_split_size_ && block_size >= max_split_size_) return false;
    if (rounded >= max_split_size_ && block_size - rounded >= kLargeBuffer) return false;
    return true;
  }
  bool should_split(Pool pool, std::size_t block_size, std::size_t rounded) const override {
    const std::size_t remaining = block_size - rounded;
    if (pool == Pool::small) return remaining >= kMinBlockSize;
    return rounded < max_split_size_ && remaining > kSmallSize;
  }

 private:
  std::size_t max_split_size_;
};

}  // namespace

PolicyRegistration pytorch_policy_registration() {
  return {
      .name = "pytorch",
      .make = [](const AllocatorOptions& options, std::size_t) -> std::unique_ptr<AllocationPolicy> {
        return std::make_unique<PytorchPolicy>(options.max_split_size);
      },
  };
}

}  // namespace memtrain::memory
