#include "memory/allocation_policy.hpp"

#include <stdexcept>
#include <string>

namespace memtrain::memory {

std::unique_ptr<AllocationPolicy> make_policy(const AllocatorOptions& options, std::size_t granularity) {
  if (options.policy == "no_cache") return make_no_cache_policy(options);
  if (options.policy == "pytorch") return make_pytorch_policy(options);
  if (options.policy == "best_fit") return make_best_fit_policy(options);
  if (options.policy == "vmm_stitch") return make_vmm_stitch_policy(options, granularity);
  throw std::invalid_argument("allocator policy '" + options.policy +
                              "' is unknown; expected one of no_cache, pytorch, best_fit, "
                              "vmm_stitch");
}

}  // namespace memtrain::memory
