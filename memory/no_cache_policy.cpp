#include <memory>

#include "memory/allocation_policy.hpp"

namespace memtrain::memory {
namespace {

// Note [no_cache: every request goes upstream]
// The baseline of naive allocation (cudaMalloc/cudaFree per tensor): each request becomes its
// own segment of exactly the rounded size, and a freed block is returned to the upstream at once
// (after the streams that use it are done). Nothing is cached, split or reused, so reserved ==
// allocated at every moment and every alloc/free pays the upstream's price: the numbers the
// caching policies are measured against.
class NoCachePolicy final : public AllocationPolicy {
 public:
  std::string_view name() const override { return "no_cache"; }
  std::size_t round_size(std::size_t bytes) const override { return round_up_checked(bytes, 256); }
  Pool pool_for(std::size_t) const override { return Pool::large; }
  std::size_t segment_size(std::size_t rounded) const override { return rounded; }
  bool may_serve(Pool, std::size_t, std::size_t) const override { return false; }
  bool should_split(Pool, std::size_t, std::size_t) const override { return false; }
  bool caches() const override { return false; }
};

}  // namespace

std::unique_ptr<AllocationPolicy> make_no_cache_policy(const AllocatorOptions&) {
  return std::make_unique<NoCachePolicy>();
}

}  // namespace memtrain::memory
