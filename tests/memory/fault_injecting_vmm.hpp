#pragma once
// A VirtualMemoryResource that forwards to another one and fails the n-th map() call, logging
// every call: lets a test inject a fault into any real VMM resource (host, CUDA) and check
// what the caller undid.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "memory/virtual_memory_resource.hpp"

namespace memtrain::memory::testing {

class FaultInjectingVmm final : public VirtualMemoryResource {
 public:
  FaultInjectingVmm(VirtualMemoryResource& inner, std::size_t fail_map_call)
      : inner_(inner), fail_map_call_(fail_map_call) {}

  std::size_t granularity() const override { return inner_.granularity(); }
  std::size_t capacity_bytes() const override { return inner_.capacity_bytes(); }
  std::string name() const override { return "faulty " + inner_.name(); }
  bool backs_memory() const override { return inner_.backs_memory(); }
  VirtualRange reserve(std::size_t bytes) override { return inner_.reserve(bytes); }
  void release(const VirtualRange& r) override { inner_.release(r); }
  PhysicalHandle create_physical(std::size_t bytes) override {
    const PhysicalHandle h = inner_.create_physical(bytes);
    created.push_back(h);
    return h;
  }
  void release_physical(PhysicalHandle h) override {
    inner_.release_physical(h);
    released.push_back(h);
  }
  void map(std::uintptr_t a, std::size_t bytes, PhysicalHandle h, std::size_t offset) override {
    if (++map_calls == fail_map_call_) throw VirtualMemoryError("injected map fault");
    inner_.map(a, bytes, h, offset);
    mapped.push_back(a);
  }
  void unmap(std::uintptr_t a, std::size_t bytes) override {
    inner_.unmap(a, bytes);
    unmapped.push_back(a);
  }

  std::size_t map_calls = 0;
  std::vector<PhysicalHandle> created, released;
  std::vector<std::uintptr_t> mapped, unmapped;

 private:
  VirtualMemoryResource& inner_;
  std::size_t fail_map_call_;
};

}  // namespace memtrain::memory::testing
