#pragma once
// The (policy, upstream) combinations that the shared allocator tests run over, like RMM's
// typed resource tests: every shared case runs on every combination it applies to.
#include <cstddef>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "memory/allocator_options.hpp"
#include "memory/caching_allocator.hpp"
#include "memory/host_resource.hpp"
#include "memory/simulated_resource.hpp"
#include "memory/simulated_virtual_memory_resource.hpp"

namespace memtrain::memory::testing {

inline constexpr std::size_t KiB = std::size_t{1} << 10;
inline constexpr std::size_t MiB = std::size_t{1} << 20;
inline constexpr std::size_t GiB = std::size_t{1} << 30;

enum class Upstream { host, simulated, simulated_vmm };

struct AllocatorCase {
  std::string policy;
  Upstream upstream;
  bool expandable = false;
};

inline std::string case_name(const AllocatorCase& c) {
  std::string up = c.upstream == Upstream::host        ? "host"
                   : c.upstream == Upstream::simulated ? "simulated"
                                                       : "simvmm";
  return c.policy + "_" + up + (c.expandable ? "_expandable" : "");
}

inline std::ostream& operator<<(std::ostream& out, const AllocatorCase& c) {
  return out << case_name(c);
}

inline std::vector<AllocatorCase> every_allocator_case() {
  return {
      {"no_cache", Upstream::host},         {"no_cache", Upstream::simulated},
      {"pytorch", Upstream::host},          {"pytorch", Upstream::simulated},
      {"pytorch", Upstream::simulated_vmm, true},
      {"best_fit", Upstream::host},         {"best_fit", Upstream::simulated},
      {"best_fit", Upstream::simulated_vmm, true},
      {"vmm_stitch", Upstream::simulated_vmm},
      {"vmm_stitch", Upstream::simulated_vmm, true},
  };
}

inline std::vector<AllocatorCase> caching_allocator_cases() {
  std::vector<AllocatorCase> out;
  for (const auto& c : every_allocator_case()) {
    if (c.policy != "no_cache") out.push_back(c);
  }
  return out;
}

// An allocator for the case with `capacity` bytes of device. Host memory is unbounded, so the
// capacity option limits it the same way (the simulated upstreams get both).
struct Harness {
  std::shared_ptr<MemoryResource> upstream;
  std::shared_ptr<SimulatedResource> simulated;           // when Upstream::simulated
  std::shared_ptr<SimulatedVirtualMemoryResource> vmm;    // when Upstream::simulated_vmm
  std::unique_ptr<CachingAllocator> allocator;

  // Bytes the upstream itself says are in use (an account the allocator does not keep);
  // -1 for host, which keeps none.
  long long upstream_used() const {
    if (simulated) return static_cast<long long>(simulated->used_bytes());
    if (vmm) return static_cast<long long>(vmm->physical_bytes());
    return -1;
  }
};

inline Harness make_harness(const AllocatorCase& c, std::size_t capacity,
                            AllocatorOptions options = {}) {
  Harness h;
  switch (c.upstream) {
    case Upstream::host: h.upstream = std::make_shared<HostResource>(); break;
    case Upstream::simulated:
      h.simulated = std::make_shared<SimulatedResource>(capacity, "simulated test device");
      h.upstream = h.simulated;
      break;
    case Upstream::simulated_vmm:
      h.vmm = std::make_shared<SimulatedVirtualMemoryResource>(capacity, "simulated vmm");
      h.upstream = h.vmm;
      break;
  }
  options.policy = c.policy;
  options.expandable_segments = c.expandable;
  options.capacity = capacity;
  h.allocator = std::make_unique<CachingAllocator>(h.upstream, options);
  return h;
}

}  // namespace memtrain::memory::testing
