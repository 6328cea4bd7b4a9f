#pragma once
// The allocation policies, in one list (allocation_policy_registry.cpp). Each policy's own file
// declares its name, what it can do before it is built, which options it refuses and how it is
// built; everything else (the allocator, option parsing, the config schema, the CLI) asks here
// instead of naming policies.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "memory/allocation_policy.hpp"
#include "memory/allocator_options.hpp"

namespace memtrain::memory {

// One allocation policy as the registry knows it before it is built. Policies have no config
// keys of their own: the allocator options (AllocatorOptions: max_split_size,
// garbage_collection_threshold, expandable_segments) act on every caching policy, and a policy
// refuses those that would do nothing under it in `validate`.
struct PolicyRegistration {
  // Its name in memory.policy, MEMTRAIN_ALLOC_CONF's policy key and --policy.
  std::string_view name;
  // Keeps freed blocks for reuse (the built policy's caches()). Only then can max_split_size, a
  // garbage_collection_threshold or expandable_segments act.
  bool caches = true;
  // Its large blocks are pages mapped into reserved address ranges, so it needs a
  // VirtualMemoryResource upstream (make is given that upstream's page size).
  bool maps_pages = false;
  // Refuses options that would silently do nothing under this policy. Throws
  // std::invalid_argument with the option, the reason and what to do. Null: every option acts.
  void (*validate)(const AllocatorOptions& options) = nullptr;
  // Builds the policy from `options`; `granularity` is the page size in bytes of a
  // virtual-memory upstream, 0 when the upstream is not one. Throws std::invalid_argument when
  // the policy cannot run on that upstream.
  std::unique_ptr<AllocationPolicy> (*make)(const AllocatorOptions& options, std::size_t granularity) = nullptr;
};

// Every policy, in the order experiments report them (no_cache, pytorch, best_fit, vmm_stitch).
// Built once, on first use, from an explicit list (no static self-registration).
const std::vector<PolicyRegistration>& registered_policies();

// The policy registered as `name`, or nullptr.
const PolicyRegistration* find_policy(std::string_view name);

// The policy registered as `name`. Throws std::invalid_argument "allocator policy '<name>' is
// unknown; expected one of <registered names>" when there is none.
const PolicyRegistration& policy_registration(std::string_view name);

// The registered names in order.
std::vector<std::string> policy_names();

// The registered names for a message: "no_cache, pytorch, best_fit, vmm_stitch".
std::string policy_name_list();

// Each policy's registration, defined in its own file; registered_policies() lists them.
PolicyRegistration no_cache_policy_registration();
PolicyRegistration pytorch_policy_registration();
PolicyRegistration best_fit_policy_registration();
PolicyRegistration vmm_stitch_policy_registration();

}  // namespace memtrain::memory
