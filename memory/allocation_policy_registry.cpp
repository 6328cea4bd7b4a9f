#include "memory/allocation_policy_registry.hpp"

#include <stdexcept>

namespace memtrain::memory {

// Note [Policies are listed, not self-registered]
// Each policy could register itself from a static object in its own file, but memtrain_memory is
// a static library: the linker drops an object file nothing refers to, and with it the
// registration, and static objects in different files initialise in no fixed order. The list
// below refers to every policy by a function, so each is linked and registered before first use,
// in the order experiments report them.
const std::vector<PolicyRegistration>& registered_policies() {
  static const std::vector<PolicyRegistration> policies = {
      no_cache_policy_registration(),
      pytorch_policy_registration(),
      best_fit_policy_registration(),
      vmm_stitch_policy_registration(),
  };
  return policies;
}

const PolicyRegistration* find_policy(std::string_view name) {
  for (const PolicyRegistration& p : registered_policies()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const PolicyRegistration& policy_registration(std::string_view name) {
  if (const PolicyRegistration* p = find_policy(name)) return *p;
  throw std::invalid_argument("allocator policy '" + std::string(name) + "' is unknown; expected one of " +
                              policy_name_list());
}

std::vector<std::string> policy_names() {
  std::vector<std::string> names;
  for (const PolicyRegistration& p : registered_policies()) names.emplace_back(p.name);
  return names;
}

std::string policy_name_list() {
  std::string list;
  for (const PolicyRegistration& p : registered_policies()) {
    if (!list.empty()) list += ", ";
    list += p.name;
  }
  return list;
}

}  // namespace memtrain::memory
