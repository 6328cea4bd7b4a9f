#pragma once
// A minimal memory::Allocator for tests of runtime/core and models/ that must not depend on the
// caching allocator's policies: every allocate is one aligned operator new, every deallocate
// one delete, and it counts live bytes per tag so tests can check what a tensor asked for.
// With `backs_memory = false` it hands out fake, never-dereferenced addresses (a dry run).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <new>
#include <stdexcept>
#include <string>

#include "memory/allocator.hpp"

namespace memtrain::testing {

class TestAllocator final : public memory::Allocator {
 public:
  explicit TestAllocator(bool backs_memory = true) : backs_memory_(backs_memory) {}

  memory::Block allocate(std::size_t bytes, memory::StreamId stream = memory::kDefaultStream,
                         memory::TagId tag = memory::kUntagged) override {
    memory::Block b{nullptr, bytes, stream, tag};
    if (bytes == 0) return b;
    if (backs_memory_) {
      b.ptr = ::operator new (bytes, std::align_val_t{256});
    } else {
      next_fake_ += (bytes + 255) / 256 * 256;
      b.ptr = reinterpret_cast<void*>(next_fake_);
    }
    live_bytes_ += static_cast<std::int64_t>(bytes);
    peak_bytes_ = std::max(peak_bytes_, live_bytes_);
    live_by_tag_[tag] += static_cast<std::int64_t>(bytes);
    ++num_allocs_;
    return b;
  }
  void deallocate(const memory::Block& b) override {
    if (b.ptr == nullptr) return;
    if (backs_memory_) ::operator delete (b.ptr, std::align_val_t{256});
    live_bytes_ -= static_cast<std::int64_t>(b.size);
    live_by_tag_[b.tag] -= static_cast<std::int64_t>(b.size);
    ++num_frees_;
  }
  void record_stream(const memory::Block&, memory::StreamId) override {}
  memory::MemoryStats stats() const override {
    memory::MemoryStats s;
    s.allocated_bytes.current = live_bytes_;
    s.allocated_bytes.peak = peak_bytes_;
    return s;
  }
  void reset_peak_stats() override { peak_bytes_ = live_bytes_; }
  std::string memory_summary() const override { return "TestAllocator"; }
  void empty_cache() override {}

  std::int64_t live_bytes() const { return live_bytes_; }
  std::int64_t peak_bytes() const { return peak_bytes_; }
  std::int64_t live_bytes(memory::TagId tag) const {
    auto it = live_by_tag_.find(tag);
    return it == live_by_tag_.end() ? 0 : it->second;
  }
  std::int64_t num_allocs() const { return num_allocs_; }
  std::int64_t num_frees() const { return num_frees_; }

 private:
  bool backs_memory_;
  std::uintptr_t next_fake_ = 1 << 20;
  std::int64_t live_bytes_ = 0, peak_bytes_ = 0, num_allocs_ = 0, num_frees_ = 0;
  std::map<memory::TagId, std::int64_t> live_by_tag_;
};

}  // namespace memtrain::testing
