// One CachingAllocator shared by several threads (it is documented
// thread-safe): blocks written by one thread are never touched by another, and
// the counters add up afterwards. Runs over every case whose memory is real
// (host and host_vm, the memfd virtual memory that vmm_stitch and expandable
// segments use on the CPU); simulated upstreams are excluded because they have
// no bytes to write.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "memory/out_of_memory.hpp"
#include "tests/memory/allocator_cases.hpp"

namespace memtrain::memory {
namespace {

using namespace memtrain::memory::testing;

class SharedAllocator : public ::testing::TestWithParam<AllocatorCase> {};

// Four threads, each on its own stream, allocate, fill, check and free on a
// device small enough that they run out of memory now and then (which makes the
// allocator release, reclaim and, with vmm_stitch, stitch while the other
// threads' blocks are live). Every block holds a pattern derived from its own
// id (thread and counter): a block handed to two owners at once, or a page
// mapped behind two blocks, shows as a mismatch.
TEST_P(SharedAllocator, ThreadsNeverSeeEachOthersBytes) {
  Harness h = make_harness(GetParam(), 48 * MiB);
  std::atomic<int> corrupted{0};
  std::atomic<int> allocations{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      struct Held {
        Block block;
        std::uint64_t id;
      };
      std::vector<Held> held;
      std::uint64_t counter = 0;
      auto check_and_free = [&](const Held& x) {
        if (first_pattern_mismatch(x.block.ptr, x.block.size, x.id) != -1) ++corrupted;
        h.allocator->deallocate(x.block);
      };
      for (int op = 0; op < 300; ++op) {
        if (held.size() < 8 && rng() % 2 == 0) {
          const std::size_t bytes = rng() % 4 == 0 ? 2 * MiB + rng() % (2 * MiB) : 1 + rng() % (64 * KiB);
          try {
            Block b = h.allocator->allocate(bytes, static_cast<StreamId>(t), static_cast<TagId>(t));
            const std::uint64_t id = (static_cast<std::uint64_t>(t) << 32) | counter++;
            fill_pattern(b.ptr, b.size, id);
            held.push_back({b, id});
            ++allocations;
          } catch (const OutOfMemory&) {}
        } else if (!held.empty()) {
          check_and_free(held.back());
          held.pop_back();
        }
        // The blocks still held must not have changed while the other threads
        // worked.
        for (const Held& x : held) {
          if (first_pattern_mismatch(x.block.ptr, x.block.size, x.id, 4096) != -1) ++corrupted;
        }
      }
      for (const Held& x : held) check_and_free(x);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(corrupted.load(), 0);
  EXPECT_GT(allocations.load(), 100);
  const MemoryStats s = h.allocator->stats();
  EXPECT_EQ(s.allocated_bytes.current, 0);
  EXPECT_EQ(s.requested_bytes.current, 0);
  EXPECT_EQ(s.allocated_bytes.allocated, s.allocated_bytes.freed);
  for (const auto& [tag, t] : s.per_tag) EXPECT_EQ(t.allocated_bytes.current, 0) << tag;
  h.allocator->empty_cache();
  if (h.upstream_used() >= 0) {
    EXPECT_EQ(h.upstream_used(), 0);
  }
  if (h.upstream_mapped() >= 0) {
    EXPECT_EQ(h.upstream_mapped(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, SharedAllocator, ::testing::ValuesIn(real_memory_allocator_cases()), CaseName());

}  // namespace
}  // namespace memtrain::memory
