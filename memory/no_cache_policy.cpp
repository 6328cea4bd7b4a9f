#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "memory/allocation_policy.hpp"
#include "memory/allocation_policy_registry.hpp"

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

// The caching policies, for a message: "pytorch, best_fit or vmm_stitch".
std::string caching_policies() {
  std::vector<std::string_view> names;
  for (const PolicyRegistration& p : registered_policies()) {
    if (p.caches) names.push_back(p.name);
  }
  std::string list;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) list += i + 1 == names.size() ? " or " : ", ";
    list += names[i];
  }
  return list;
}

// Every allocator option acts on cached blocks; under no_cache each would silently do nothing.
void validate(const AllocatorOptions& options) {
  if (options.max_split_size != kMaxSplitSizeUnset) {
    throw std::invalid_argument(
        "max_split_size does nothing with policy no_cache (it never splits blocks); "
        "unset it or choose " +
        caching_policies());
  }
  if (options.garbage_collection_threshold > 0.0) {
    throw std::invalid_argument(
        "garbage_collection_threshold does nothing with policy no_cache (it caches nothing); "
        "unset it or choose a caching policy");
  }
  if (options.expandable_segments) {
    throw std::invalid_argument(
        "expandable_segments does nothing with policy no_cache (it returns every block to "
        "the device); unset it or choose a caching policy");
  }
}

}  // namespace

PolicyRegistration no_cache_policy_registration() {
  return {
      .name = "no_cache",
      .caches = false,
      .validate = validate,
      .make = [](const AllocatorOptions&, std::size_t) -> std::unique_ptr<AllocationPolicy> {
        return std::make_unique<NoCachePolicy>();
      },
  };
}

}  // namespace memtrain::memory
