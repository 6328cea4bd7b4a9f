// Shared cases run over every (policy, upstream) combination
// (allocator_cases.hpp): alignment, no overlap of live blocks, stats against an
// independently kept ledger, OOM consistency, blocks used by other streams,
// trace events. Each compares with something the allocator did not compute: the
// test's own ledger of live blocks, the upstream's own usage count, bytes
// written into the blocks. The cases that write and read bytes run only over
// the upstreams whose memory is real (host, host_vm): the simulated ones hand
// out addresses with nothing behind them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "memory/allocation_policy.hpp"
#include "memory/out_of_memory.hpp"
#include "memory/stream_registry.hpp"
#include "memory/trace_event.hpp"
#include "tests/memory/allocator_cases.hpp"

namespace memtrain::memory {
namespace {

using namespace memtrain::memory::testing;

// What the test knows independently of the allocator: the blocks it holds.
struct Ledger {
  std::map<std::uintptr_t, Block> live;
  std::map<TagId, std::int64_t> requested_by_tag;
  std::int64_t requested = 0;

  void add(const Block& b) {
    live.emplace(reinterpret_cast<std::uintptr_t>(b.ptr), b);
    requested += static_cast<std::int64_t>(b.size);
    requested_by_tag[b.tag] += static_cast<std::int64_t>(b.size);
  }
  void remove(const Block& b) {
    live.erase(reinterpret_cast<std::uintptr_t>(b.ptr));
    requested -= static_cast<std::int64_t>(b.size);
    requested_by_tag[b.tag] -= static_cast<std::int64_t>(b.size);
  }
  // Two live blocks overlap when one starts before the previous one (by
  // address) ends.
  bool overlaps() const {
    std::uintptr_t end = 0;
    for (const auto& [address, b] : live) {
      if (address < end) return true;
      end = address + b.size;
    }
    return false;
  }
};

void expect_non_negative(const StatCounter& c, const char* name) {
  EXPECT_GE(c.current, 0) << name;
  EXPECT_GE(c.peak, c.current) << name;
  EXPECT_GE(c.allocated, 0) << name;
  EXPECT_GE(c.freed, 0) << name;
  EXPECT_EQ(c.allocated - c.freed, c.current) << name;
}

void expect_consistent(const Harness& h, const Ledger& ledger) {
  const MemoryStats s = h.allocator->stats();
  expect_non_negative(s.allocated_bytes, "allocated_bytes");
  expect_non_negative(s.reserved_bytes, "reserved_bytes");
  expect_non_negative(s.active_bytes, "active_bytes");
  expect_non_negative(s.inactive_split_bytes, "inactive_split_bytes");
  expect_non_negative(s.requested_bytes, "requested_bytes");
  EXPECT_EQ(s.requested_bytes.current, ledger.requested);
  for (const auto& [tag, bytes] : ledger.requested_by_tag) {
    const auto it = s.per_tag.find(tag);
    const std::int64_t got = it == s.per_tag.end() ? 0 : it->second.requested_bytes.current;
    EXPECT_EQ(got, bytes) << "tag " << tag;
  }
  EXPECT_GE(s.allocated_bytes.current, s.requested_bytes.current);
  EXPECT_GE(s.active_bytes.current, s.allocated_bytes.current);
  EXPECT_GE(s.reserved_bytes.current, s.active_bytes.current);
  EXPECT_LE(s.inactive_split_bytes.current, s.reserved_bytes.current - s.allocated_bytes.current);
  EXPECT_GE(s.fragmentation, 0.0);
  EXPECT_LE(s.fragmentation, 1.0);
  if (h.upstream_used() >= 0) {
    if (h.granularity() == 1) {
      EXPECT_EQ(s.reserved_bytes.current, h.upstream_used());
    } else {
      // A virtual-memory upstream rounds every segment up to whole pages
      // (no_cache asks for 256-byte multiples); stitched ranges map pages that
      // other segments own.
      std::int64_t segments = 0, pages = 0;
      for (const SegmentSnapshot& seg : h.allocator->snapshot()) {
        if (seg.is_stitched) continue;
        segments += static_cast<std::int64_t>(seg.total_size);
        pages += static_cast<std::int64_t>(round_up_checked(seg.total_size, h.granularity()));
      }
      EXPECT_EQ(s.reserved_bytes.current, segments);
      EXPECT_EQ(pages, h.upstream_used());
    }
  }
  EXPECT_FALSE(ledger.overlaps());
}

// After everything is freed and the cache emptied, the upstream holds nothing
// either.
void expect_upstream_empty(const Harness& h) {
  if (h.upstream_used() >= 0) {
    EXPECT_EQ(h.upstream_used(), 0);
  }
  if (h.upstream_mapped() >= 0) {
    EXPECT_EQ(h.upstream_mapped(), 0);
  }
  if (h.upstream_live_chunks() >= 0) {
    EXPECT_EQ(h.upstream_live_chunks(), 0);
  }
  if (h.upstream_live_reservations() >= 0) {
    EXPECT_EQ(h.upstream_live_reservations(), 0);
  }
}

class EveryAllocator : public ::testing::TestWithParam<AllocatorCase> {};

// Random heavy-tailed sizes (1 B to 32 MiB), random frees, three tags: after
// every operation the stats equal the test's ledger, live blocks never overlap,
// every address is 256-aligned, and reserved equals what the upstream itself
// has handed out.
TEST_P(EveryAllocator, StatsMatchLedgerAndLiveBlocksNeverOverlap) {
  Harness h = make_harness(GetParam(), 512 * MiB);
  Ledger ledger;
  std::mt19937_64 rng(42);
  std::vector<Block> held;
  for (int op = 0; op < 600; ++op) {
    if (held.empty() || rng() % 3 != 0) {
      const int magnitude = static_cast<int>(rng() % 26);  // 2^0 .. 2^25 bytes
      const std::size_t bytes = (std::size_t{1} << magnitude) + rng() % (std::size_t{1} << magnitude);
      const auto tag = static_cast<TagId>(rng() % 3);
      try {
        Block b = h.allocator->allocate(bytes, kDefaultStream, tag);
        ASSERT_EQ(reinterpret_cast<std::uintptr_t>(b.ptr) % 256, 0u) << bytes;
        ASSERT_EQ(b.size, bytes);
        ledger.add(b);
        held.push_back(b);
      } catch (const OutOfMemory&) {
        // Allowed: the device is finite. Consistency is checked below either
        // way.
      }
    } else {
      const std::size_t i = rng() % held.size();
      h.allocator->deallocate(held[i]);
      ledger.remove(held[i]);
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
    }
    expect_consistent(h, ledger);
    if (::testing::Test::HasFailure()) return;
  }
  for (const Block& b : held) {
    h.allocator->deallocate(b);
    ledger.remove(b);
  }
  h.allocator->empty_cache();
  const MemoryStats s = h.allocator->stats();
  EXPECT_EQ(s.allocated_bytes.current, 0);
  EXPECT_EQ(s.reserved_bytes.current, 0);
  EXPECT_EQ(s.inactive_split_bytes.current, 0);
  expect_upstream_empty(h);
}

TEST_P(EveryAllocator, ZeroBytesGivesNullBlockAndNullIsIgnoredOnFree) {
  Harness h = make_harness(GetParam(), 64 * MiB);
  Block b = h.allocator->allocate(0, kDefaultStream, 2);
  EXPECT_EQ(b.ptr, nullptr);
  EXPECT_EQ(b.size, 0u);
  h.allocator->deallocate(b);
  EXPECT_EQ(h.allocator->stats().allocated_bytes.allocated, 0);
}

// Note [Scanning for releasable segments]: a release that finds nothing to release (every
// segment in use) must not stop later ones from releasing what is freed afterwards, whether a
// whole segment is freed at once or becomes whole as its last block is freed.
TEST_P(EveryAllocator, SegmentsFreedAfterAFruitlessReleaseAreReleased) {
  Harness h = make_harness(GetParam(), 64 * MiB);
  Block whole = h.allocator->allocate(4 * MiB);
  Block a = h.allocator->allocate(3 * MiB);
  Block b = h.allocator->allocate(5 * MiB);
  h.allocator->empty_cache();  // everything in use: nothing released
  EXPECT_GT(h.allocator->stats().reserved_bytes.current, 0);
  h.allocator->deallocate(whole);
  h.allocator->deallocate(a);
  h.allocator->empty_cache();
  h.allocator->deallocate(b);
  h.allocator->empty_cache();
  const MemoryStats s = h.allocator->stats();
  EXPECT_EQ(s.allocated_bytes.current, 0);
  EXPECT_EQ(s.reserved_bytes.current, 0);
  expect_upstream_empty(h);
}

// Sizes whose rounding would wrap around std::size_t must fail as out of
// memory, not succeed with a tiny block; the allocator is usable afterwards.
TEST_P(EveryAllocator, RequestsNearSizeMaxFailWithoutWrapping) {
  Harness h = make_harness(GetParam(), 64 * MiB);
  for (std::size_t bytes : {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 255, SIZE_MAX / 2 + 1, std::size_t{64} * MiB + 1}) {
    EXPECT_THROW(h.allocator->allocate(bytes), OutOfMemory) << bytes;
  }
  EXPECT_EQ(h.allocator->stats().num_ooms, 5);
  Block b = h.allocator->allocate(MiB);
  EXPECT_NE(b.ptr, nullptr);
  h.allocator->deallocate(b);
}

// After an out-of-memory error the cache is consistent: freeing what is held
// makes room for the request that failed.
TEST_P(EveryAllocator, OutOfMemoryLeavesAllocatorUsable) {
  Harness h = make_harness(GetParam(), 128 * MiB);
  Ledger ledger;
  std::vector<Block> held;
  for (;;) {
    try {
      held.push_back(h.allocator->allocate(24 * MiB));
      ledger.add(held.back());
    } catch (const OutOfMemory&) {
      break;
    }
    ASSERT_LT(held.size(), 6u) << "128 MiB cannot hold six 24 MiB blocks";
  }
  EXPECT_EQ(h.allocator->stats().num_ooms, 1);
  expect_consistent(h, ledger);
  for (const Block& b : held) {
    h.allocator->deallocate(b);
    ledger.remove(b);
  }
  Block big = h.allocator->allocate(100 * MiB);
  EXPECT_NE(big.ptr, nullptr);
  ledger.add(big);
  expect_consistent(h, ledger);
  h.allocator->deallocate(big);
}

TEST_P(EveryAllocator, FreeOfUnknownPointerThrows) {
  Harness h = make_harness(GetParam(), 64 * MiB);
  Block b = h.allocator->allocate(1000);
  h.allocator->deallocate(b);
  EXPECT_THROW(h.allocator->deallocate(b), std::invalid_argument);
  int local = 0;
  EXPECT_THROW(h.allocator->deallocate(Block{&local, 4}), std::invalid_argument);
}

// Issue case 2: a block freed while a second stream still uses it, then the
// same size requested on the first stream when the device is nearly full:
// served once that stream completes (the allocator waits for its event),
// counted as one retry, no out-of-memory error.
TEST_P(EveryAllocator, FreedOnOtherStreamIsReusedAfterCompletion) {
  Harness h = make_harness(GetParam(), 128 * MiB);
  StreamRegistry streams;
  h.allocator->set_stream_registry(&streams);
  const StreamId first = streams.create_stream();
  const StreamId second = streams.create_stream();
  Block x = h.allocator->allocate(64 * MiB, first);
  Block filler = h.allocator->allocate(48 * MiB, first);
  h.allocator->record_stream(x, second);
  h.allocator->deallocate(x);
  EXPECT_EQ(streams.outstanding(second), 1u);
  EXPECT_EQ(h.allocator->stats().active_bytes.current, h.allocator->stats().allocated_bytes.current + 64 * MiB)
      << "the pending block stays active";
  Block y = h.allocator->allocate(64 * MiB, first);
  EXPECT_EQ(streams.outstanding(second), 0u) << "served by waiting for the second stream";
  const MemoryStats s = h.allocator->stats();
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.num_ooms, 0);
  if (GetParam().policy != "no_cache") {
    EXPECT_EQ(y.ptr, x.ptr) << "the cached block is reused";
  }
  h.allocator->deallocate(y);
  h.allocator->deallocate(filler);
}

// When the owner completes the other stream first, the block is reused without
// any retry.
TEST_P(EveryAllocator, CompletedStreamReleasesBlockWithoutRetry) {
  Harness h = make_harness(GetParam(), 128 * MiB);
  StreamRegistry streams;
  h.allocator->set_stream_registry(&streams);
  const StreamId first = streams.create_stream();
  const StreamId second = streams.create_stream();
  Block x = h.allocator->allocate(64 * MiB, first);
  h.allocator->record_stream(x, second);
  h.allocator->deallocate(x);
  streams.complete(second);
  Block y = h.allocator->allocate(64 * MiB, first);
  EXPECT_EQ(h.allocator->stats().num_alloc_retries, 0);
  EXPECT_EQ(h.allocator->stats().active_bytes.current, h.allocator->stats().allocated_bytes.current);
  h.allocator->deallocate(y);
}

// Every alloc and free produces one event with the caller's size, stream and
// tag, and the same allocation id for a block's alloc and free; segment events
// add up to the reserved bytes.
TEST_P(EveryAllocator, TraceEventsPairAllocationsAndAddUpToReserved) {
  Harness h = make_harness(GetParam(), 256 * MiB);
  std::vector<TraceEvent> events;
  h.allocator->set_event_sink([&](const TraceEvent& e) { events.push_back(e); });
  std::vector<Block> blocks;
  for (std::size_t i = 1; i <= 8; ++i) blocks.push_back(h.allocator->allocate(i * 3 * MiB + i, 0, 7));
  for (std::size_t i = 0; i < blocks.size(); i += 2) h.allocator->deallocate(blocks[i]);
  std::map<std::uint64_t, std::uint64_t> open;  // allocation id -> bytes
  std::int64_t reserved = 0;
  std::size_t allocs = 0, frees = 0;
  for (const TraceEvent& e : events) {
    switch (e.kind) {
      case TraceEventKind::alloc:
        ++allocs;
        EXPECT_EQ(e.tag, 7);
        EXPECT_TRUE(open.emplace(e.allocation_id, e.bytes).second);
        break;
      case TraceEventKind::free:
        ++frees;
        ASSERT_EQ(open.count(e.allocation_id), 1u);
        EXPECT_EQ(open[e.allocation_id], e.bytes);
        open.erase(e.allocation_id);
        break;
      case TraceEventKind::segment_alloc:
        reserved += static_cast<std::int64_t>(e.bytes);
        break;
      case TraceEventKind::segment_free:
        reserved -= static_cast<std::int64_t>(e.bytes);
        break;
      default:
        break;
    }
  }
  EXPECT_EQ(allocs, 8u);
  EXPECT_EQ(frees, 4u);
  // Expandable segments grow by mapping (segment_map), not by new segments.
  if (!GetParam().expandable) {
    EXPECT_EQ(reserved, h.allocator->stats().reserved_bytes.current);
  }
  for (std::size_t i = 1; i < blocks.size(); i += 2) h.allocator->deallocate(blocks[i]);
}

// The snapshot's blocks tile each segment and its allocated sizes agree with
// the live blocks.
TEST_P(EveryAllocator, SnapshotBlocksTileSegments) {
  Harness h = make_harness(GetParam(), 256 * MiB);
  std::vector<Block> blocks;
  for (std::size_t bytes : {100u, 5000u, 700000u, 3000000u, 25000000u}) {
    blocks.push_back(h.allocator->allocate(bytes));
  }
  h.allocator->deallocate(blocks[1]);
  std::size_t allocated = 0, live = 0;
  for (const SegmentSnapshot& seg : h.allocator->snapshot()) {
    std::uintptr_t at = seg.address;
    for (const BlockSnapshot& b : seg.blocks) {
      EXPECT_EQ(b.address, at);
      at += b.size;
      if (b.state == "active_allocated") ++live;
    }
    EXPECT_EQ(at, seg.address + seg.total_size);
    allocated += seg.allocated_size;
  }
  EXPECT_EQ(live, 4u);
  EXPECT_EQ(static_cast<std::int64_t>(allocated), h.allocator->stats().allocated_bytes.current);
  for (std::size_t i : {0u, 2u, 3u, 4u}) h.allocator->deallocate(blocks[i]);
}

TEST_P(EveryAllocator, ResetPeakStatsSetsPeaksToCurrent) {
  Harness h = make_harness(GetParam(), 256 * MiB);
  Block a = h.allocator->allocate(40 * MiB);
  Block b = h.allocator->allocate(40 * MiB);
  h.allocator->deallocate(b);
  EXPECT_GE(h.allocator->stats().allocated_bytes.peak, static_cast<std::int64_t>(80 * MiB));
  h.allocator->reset_peak_stats();
  const MemoryStats s = h.allocator->stats();
  EXPECT_EQ(s.allocated_bytes.peak, s.allocated_bytes.current);
  EXPECT_EQ(s.reserved_bytes.peak, s.reserved_bytes.current);
  h.allocator->deallocate(a);
}

INSTANTIATE_TEST_SUITE_P(Policies, EveryAllocator, ::testing::ValuesIn(every_allocator_case()), CaseName());

// The cases that write into blocks and read the bytes back. Simulated upstreams
// (simulated, simulated_vm) are excluded: they only hand out addresses, there
// is no memory to write.
class EveryAllocatorOnRealMemory : public ::testing::TestWithParam<AllocatorCase> {};

// Bytes written into one live block survive writes into all the others.
TEST_P(EveryAllocatorOnRealMemory, WritesToOneBlockNeverReachAnother) {
  Harness h = make_harness(GetParam(), 256 * MiB);
  std::vector<Block> blocks;
  std::vector<std::size_t> sizes = {1, 255, 256, 257, 4096, 100000, MiB, MiB + 1, 3 * MiB + 5};
  for (int round = 0; round < 3; ++round) {
    for (std::size_t bytes : sizes) blocks.push_back(h.allocator->allocate(bytes));
    // Free every third block so later blocks reuse the holes.
    for (std::size_t i = blocks.size() - sizes.size(); i < blocks.size(); i += 3) {
      h.allocator->deallocate(blocks[i]);
      blocks[i] = Block{};
    }
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].ptr) fill_pattern(blocks[i].ptr, blocks[i].size, i);
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (!blocks[i].ptr) continue;
    ASSERT_EQ(first_pattern_mismatch(blocks[i].ptr, blocks[i].size, i), -1) << "block " << i;
    h.allocator->deallocate(blocks[i]);
  }
}

// Data integrity through everything the allocator does to memory: random sizes
// (small-pool and large-pool), random frees, two streams, empty_cache now and
// then (which unmaps the free end of expandable segments, and releases whole
// cached segments), out-of-memory retries on a small device (which stitch free
// pages under vmm_stitch). Every block is filled with a pattern derived from
// its id when it is handed out; after every operation every live block still
// holds its pattern (one word per 4 KiB page and both ends), and each block is
// checked byte for byte when it is freed. The run must have exercised what it
// is about: stitching for vmm_stitch, unmapping and mapping again for
// expandable segments.
TEST_P(EveryAllocatorOnRealMemory, EveryBlockKeepsItsBytesThroughChurn) {
  Harness h = make_harness(GetParam(), 48 * MiB);
  StreamRegistry streams;
  h.allocator->set_stream_registry(&streams);
  const StreamId side = streams.create_stream();
  std::size_t unmaps = 0, maps_after_unmap = 0;
  h.allocator->set_event_sink([&](const TraceEvent& e) {
    if (e.kind == TraceEventKind::segment_unmap) ++unmaps;
    if (e.kind == TraceEventKind::segment_map && unmaps > 0) ++maps_after_unmap;
  });
  struct Held {
    Block block;
    std::uint64_t id;
  };
  std::vector<Held> held;
  std::uint64_t next_id = 1;
  std::size_t stitched_seen = 0, ooms = 0;
  std::mt19937_64 rng(7);
  auto release = [&](std::size_t i) {
    const Held x = held[i];
    held[i] = held.back();
    held.pop_back();
    ASSERT_EQ(first_pattern_mismatch(x.block.ptr, x.block.size, x.id), -1)
        << "block " << x.id << " of " << x.block.size << " bytes, on free";
    h.allocator->deallocate(x.block);
  };
  for (int op = 0; op < 400; ++op) {
    const std::uint64_t r = rng() % 100;
    if (r < 3) {
      h.allocator->empty_cache();
    } else if (!held.empty() && r < 45) {
      release(rng() % held.size());
    } else {
      const std::size_t bytes = rng() % 3 == 0 ? 1 + rng() % MiB : (1 + rng() % 4) * MiB + rng() % MiB;
      const StreamId stream = rng() % 5 == 0 ? side : kDefaultStream;
      try {
        Block b = h.allocator->allocate(bytes, stream);
        ASSERT_NE(b.ptr, nullptr);
        fill_pattern(b.ptr, b.size, next_id);
        held.push_back({b, next_id++});
        for (const SegmentSnapshot& seg : h.allocator->snapshot()) {
          stitched_seen += seg.is_stitched && seg.address == reinterpret_cast<std::uintptr_t>(b.ptr);
        }
      } catch (const OutOfMemory&) {
        ++ooms;
        if (!held.empty()) release(rng() % held.size());
      }
    }
    if (::testing::Test::HasFatalFailure()) return;
    for (const Held& x : held) {
      ASSERT_EQ(first_pattern_mismatch(x.block.ptr, x.block.size, x.id, 4096), -1)
          << "block " << x.id << " of " << x.block.size << " bytes, after op " << op;
    }
  }
  while (!held.empty()) {
    release(held.size() - 1);
    if (::testing::Test::HasFatalFailure()) return;
  }
  streams.complete(side);
  h.allocator->empty_cache();
  EXPECT_EQ(h.allocator->stats().reserved_bytes.current, 0);
  expect_upstream_empty(h);
  EXPECT_GT(ooms, 0u) << "the device never filled up";
  if (GetParam().policy == "vmm_stitch") {
    EXPECT_GT(stitched_seen, 0u) << "nothing was stitched";
  }
  if (GetParam().expandable) {
    EXPECT_GT(unmaps, 0u) << "no page was unmapped";
    EXPECT_GT(maps_after_unmap, 0u) << "no page was mapped after an unmap";
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, EveryAllocatorOnRealMemory, ::testing::ValuesIn(real_memory_allocator_cases()),
                         CaseName());

}  // namespace
}  // namespace memtrain::memory
