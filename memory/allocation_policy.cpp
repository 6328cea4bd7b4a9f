#include "memory/allocation_policy.hpp"

#include "memory/allocation_policy_registry.hpp"

namespace memtrain::memory {

std::unique_ptr<AllocationPolicy> make_policy(const AllocatorOptions& options, std::size_t granularity) {
  return policy_registration(options.policy).make(options, granularity);
}

}  // namespace memtrain::memory
