#pragma once
// The (policy, upstream) combinations that the shared allocator tests run over,
// like RMM's typed resource tests: every shared case runs on every combination
// that can back it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "memory/allocator_options.hpp"
#include "memory/caching_allocator.hpp"
#include "memory/host_resource.hpp"
#include "memory/host_virtual_memory_resource.hpp"
#include "memory/simulated_resource.hpp"
#include "memory/simulated_virtual_memory_resource.hpp"

namespace memtrain::memory::testing {

inline constexpr std::size_t KiB = std::size_t{1} << 10;
inline constexpr std::size_t MiB = std::size_t{1} << 20;
inline constexpr std::size_t GiB = std::size_t{1} << 30;

// host: HostResource (aligned heap memory). host_huge: HostResource with huge_pages (2 MiB and
// up mapped in transparent huge pages, as a CPU run's allocator). simulated: SimulatedResource
// (addresses only). simulated_vm: SimulatedVirtualMemoryResource (the page
// model, addresses only; keeps logs of every call). host_vm:
// HostVirtualMemoryResource (memfd chunks mapped with mmap(MAP_FIXED): real
// bytes, the model the runtime uses on the CPU for vmm_stitch and expandable
// segments).
enum class Upstream { host, host_huge, simulated, simulated_vm, host_vm };

inline const char* upstream_name(Upstream u) {
  switch (u) {
    case Upstream::host:
      return "host";
    case Upstream::host_huge:
      return "host_huge";
    case Upstream::simulated:
      return "simulated";
    case Upstream::simulated_vm:
      return "simulated_vm";
    case Upstream::host_vm:
      return "host_vm";
  }
  return "unknown";
}

// Whether the upstream's memory can be written and read back (the simulated
// ones hand out addresses with nothing behind them).
inline bool backs_memory(Upstream u) {
  return u == Upstream::host || u == Upstream::host_huge || u == Upstream::host_vm;
}
inline bool maps_pages(Upstream u) { return u == Upstream::simulated_vm || u == Upstream::host_vm; }

struct AllocatorCase {
  std::string policy;
  Upstream upstream;
  bool expandable = false;
};

// "vmm_stitch_over_host_vm", "best_fit_over_simulated_vm_expandable": a valid
// gtest name.
inline std::string case_name(const AllocatorCase& c) {
  return c.policy + "_over_" + upstream_name(c.upstream) + (c.expandable ? "_expandable" : "");
}

inline std::ostream& operator<<(std::ostream& out, const AllocatorCase& c) { return out << case_name(c); }

// For INSTANTIATE_TEST_SUITE_P over AllocatorCase.
struct CaseName {
  template <class Info>
  std::string operator()(const Info& info) const {
    return case_name(info.param);
  }
};

// Every policy over every upstream that can back it: vmm_stitch and expandable
// segments need an upstream that maps pages; no_cache caches nothing, so it has
// no expandable variant.
inline std::vector<AllocatorCase> every_allocator_case() {
  std::vector<AllocatorCase> out;
  for (const char* policy : {"no_cache", "pytorch", "best_fit", "vmm_stitch"}) {
    for (Upstream u :
         {Upstream::host, Upstream::host_huge, Upstream::simulated, Upstream::simulated_vm, Upstream::host_vm}) {
      const bool vm = maps_pages(u);
      if (std::string(policy) != "vmm_stitch" || vm) out.push_back({policy, u, false});
      if (std::string(policy) != "no_cache" && vm) out.push_back({policy, u, true});
    }
  }
  return out;
}

// The cases whose memory holds bytes: the only ones a test that writes into
// blocks can use.
inline std::vector<AllocatorCase> real_memory_allocator_cases() {
  std::vector<AllocatorCase> out;
  for (const auto& c : every_allocator_case()) {
    if (backs_memory(c.upstream)) out.push_back(c);
  }
  return out;
}

// The cases on an upstream that maps pages and whose policy maps them itself
// (stitching or expandable segments), the ones virtual-memory tests are about.
inline std::vector<AllocatorCase> virtual_memory_allocator_cases() {
  std::vector<AllocatorCase> out;
  for (const auto& c : every_allocator_case()) {
    if (maps_pages(c.upstream) && (c.policy == "vmm_stitch" || c.expandable)) out.push_back(c);
  }
  return out;
}

inline std::vector<AllocatorCase> caching_allocator_cases() {
  std::vector<AllocatorCase> out;
  for (const auto& c : every_allocator_case()) {
    if (c.policy != "no_cache") out.push_back(c);
  }
  return out;
}

// An allocator for the case with `capacity` bytes of device. Host memory is
// unbounded, so the capacity option limits it the same way (the other upstreams
// get both). host_vm uses CUDA's 2 MiB granularity, as the runtime does.
struct Harness {
  std::shared_ptr<MemoryResource> upstream;
  std::shared_ptr<SimulatedResource> simulated;         // when Upstream::simulated
  std::shared_ptr<SimulatedVirtualMemoryResource> vmm;  // when Upstream::simulated_vm
  std::shared_ptr<HostVirtualMemoryResource> host_vm;   // when Upstream::host_vm
  std::unique_ptr<CachingAllocator> allocator;

  // The upstream's page size when it maps pages (it rounds every allocation up
  // to it), else 1.
  std::size_t granularity() const {
    if (vmm) return vmm->granularity();
    if (host_vm) return host_vm->granularity();
    return 1;
  }
  // Bytes the upstream itself says are in use (an account the allocator does
  // not keep); -1 for host, which keeps none.
  long long upstream_used() const {
    if (simulated) return static_cast<long long>(simulated->used_bytes());
    if (vmm) return static_cast<long long>(vmm->physical_bytes());
    if (host_vm) return static_cast<long long>(host_vm->physical_bytes());
    return -1;
  }
  // Bytes mapped anywhere (stitched ranges map pages a second time); -1 without
  // page mapping.
  long long upstream_mapped() const {
    if (vmm) return static_cast<long long>(vmm->mapped_bytes());
    if (host_vm) return static_cast<long long>(host_vm->mapped_bytes());
    return -1;
  }
  long long upstream_live_chunks() const {
    if (vmm) return static_cast<long long>(vmm->live_chunks());
    if (host_vm) return static_cast<long long>(host_vm->live_chunks());
    return -1;
  }
  long long upstream_live_reservations() const {
    if (vmm) return static_cast<long long>(vmm->live_reservations());
    if (host_vm) return static_cast<long long>(host_vm->live_reservations());
    return -1;
  }
};

inline Harness make_harness(const AllocatorCase& c, std::size_t capacity, AllocatorOptions options = {}) {
  Harness h;
  switch (c.upstream) {
    case Upstream::host:
      h.upstream = std::make_shared<HostResource>();
      break;
    case Upstream::host_huge:
      h.upstream = std::make_shared<HostResource>(256, /*huge_pages=*/true);
      break;
    case Upstream::simulated:
      h.simulated = std::make_shared<SimulatedResource>(capacity, "simulated test device");
      h.upstream = h.simulated;
      break;
    case Upstream::simulated_vm:
      h.vmm = std::make_shared<SimulatedVirtualMemoryResource>(capacity, "simulated vmm");
      h.upstream = h.vmm;
      break;
    case Upstream::host_vm:
      h.host_vm = std::make_shared<HostVirtualMemoryResource>(capacity, std::size_t{2} << 20, "host vmm");
      h.upstream = h.host_vm;
      break;
  }
  options.policy = c.policy;
  options.expandable_segments = c.expandable;
  options.capacity = capacity;
  h.allocator = std::make_unique<CachingAllocator>(h.upstream, options);
  return h;
}

// A pattern derived from a block's id and a word's index in it (splitmix64), so
// that every block holds bytes no other block holds and a test can tell whose
// bytes a block has.
inline std::uint64_t pattern_word(std::uint64_t id, std::size_t word) {
  std::uint64_t z = id * 0x9e3779b97f4a7c15ULL + word + 1;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Fills [p, p + bytes) with the block's pattern: whole words, then the low
// bytes of the next word for a tail. `p` must be 8-byte aligned (blocks are
// 256-byte aligned).
inline void fill_pattern(void* p, std::size_t bytes, std::uint64_t id) {
  auto* words = static_cast<std::uint64_t*>(p);
  const std::size_t n = bytes / 8;
  for (std::size_t i = 0; i < n; ++i) words[i] = pattern_word(id, i);
  auto* tail = static_cast<unsigned char*>(p) + n * 8;
  const std::uint64_t last = pattern_word(id, n);
  for (std::size_t i = 0; i < bytes % 8; ++i) tail[i] = static_cast<unsigned char>(last >> (8 * i));
}

// Offset of the first byte of [p, p + bytes) that differs from the block's
// pattern, or -1. With `stride` > 8 only one word every `stride` bytes is read,
// plus the first and last 256 bytes (a cheaper check that still sees a page
// mapped to the wrong memory, or an overrun at either end).
inline long long first_pattern_mismatch(const void* p, std::size_t bytes, std::uint64_t id, std::size_t stride = 8) {
  const auto* words = static_cast<const std::uint64_t*>(p);
  const std::size_t n = bytes / 8;
  const std::size_t step = stride < 8 ? 1 : stride / 8;
  auto check = [&](std::size_t i) { return words[i] == pattern_word(id, i); };
  for (std::size_t i = 0; i < n && i < 32; ++i) {
    if (!check(i)) return static_cast<long long>(i * 8);
  }
  for (std::size_t i = 0; i < n; i += step) {
    if (!check(i)) return static_cast<long long>(i * 8);
  }
  for (std::size_t i = n > 32 ? n - 32 : 0; i < n; ++i) {
    if (!check(i)) return static_cast<long long>(i * 8);
  }
  const auto* tail = static_cast<const unsigned char*>(p) + n * 8;
  const std::uint64_t last = pattern_word(id, n);
  for (std::size_t i = 0; i < bytes % 8; ++i) {
    if (tail[i] != static_cast<unsigned char>(last >> (8 * i))) {
      return static_cast<long long>(n * 8 + i);
    }
  }
  return -1;
}

}  // namespace memtrain::memory::testing
