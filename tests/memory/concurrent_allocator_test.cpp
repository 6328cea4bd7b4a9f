// One CachingAllocator shared by several threads (it is documented thread-safe): blocks written
// by one thread are never touched by another, and the counters add up afterwards.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "memory/out_of_memory.hpp"
#include "tests/memory/allocator_cases.hpp"

namespace memtrain::memory {
namespace {

using namespace memtrain::memory::testing;

class SharedAllocator : public ::testing::TestWithParam<std::string> {};

TEST_P(SharedAllocator, ThreadsNeverSeeEachOthersBytes) {
  Harness h = make_harness({GetParam(), Upstream::host}, 512 * MiB);
  std::atomic<int> corrupted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<Block> held;
      const auto mark = static_cast<unsigned char>(t + 1);
      for (int op = 0; op < 400; ++op) {
        if (held.size() < 8 && rng() % 2 == 0) {
          const std::size_t bytes = rng() % 8 == 0 ? 2 * MiB + rng() % MiB : 1 + rng() % (64 * KiB);
          try {
            Block b = h.allocator->allocate(bytes, static_cast<StreamId>(t), static_cast<TagId>(t));
            std::memset(b.ptr, mark, b.size);
            held.push_back(b);
          } catch (const OutOfMemory&) {
          }
        } else if (!held.empty()) {
          Block b = held.back();
          held.pop_back();
          const auto* p = static_cast<const unsigned char*>(b.ptr);
          if (!std::all_of(p, p + b.size, [&](unsigned char v) { return v == mark; })) ++corrupted;
          h.allocator->deallocate(b);
        }
      }
      for (const Block& b : held) h.allocator->deallocate(b);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(corrupted.load(), 0);
  const MemoryStats s = h.allocator->stats();
  EXPECT_EQ(s.allocated_bytes.current, 0);
  EXPECT_EQ(s.requested_bytes.current, 0);
  EXPECT_EQ(s.allocated_bytes.allocated, s.allocated_bytes.freed);
  for (const auto& [tag, t] : s.per_tag) EXPECT_EQ(t.allocated_bytes.current, 0) << tag;
}

INSTANTIATE_TEST_SUITE_P(Policies, SharedAllocator,
                         ::testing::Values("no_cache", "pytorch", "best_fit"));

}  // namespace
}  // namespace memtrain::memory
