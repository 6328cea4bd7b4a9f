// The policies' documented rules, value by value. The pytorch numbers are those
// of PyTorch's CUDA caching allocator documentation (512 B rounding, 2 MiB
// small segments, 20 MiB segments for 1-10 MiB requests, 2 MiB rounding above,
// split thresholds, max_split_size).
#include <gtest/gtest.h>

#include <memory>

#include "memory/allocation_policy.hpp"
#include "tests/memory/allocator_cases.hpp"

namespace memtrain::memory {
namespace {

using namespace memtrain::memory::testing;

std::unique_ptr<AllocationPolicy> pytorch(std::size_t max_split = kMaxSplitSizeUnset) {
  AllocatorOptions o;
  o.policy = "pytorch";
  o.max_split_size = max_split;
  return make_policy(o, 0);
}

TEST(PytorchPolicyRules, RoundsTo512Bytes) {
  auto p = pytorch();
  EXPECT_EQ(p->round_size(1), 512u);
  EXPECT_EQ(p->round_size(512), 512u);
  EXPECT_EQ(p->round_size(513), 1024u);
  EXPECT_EQ(p->round_size(SIZE_MAX - 10), 0u) << "overflow is reported, not wrapped";
}

TEST(PytorchPolicyRules, PoolsAndSegmentSizes) {
  auto p = pytorch();
  EXPECT_EQ(p->pool_for(MiB), Pool::small);
  EXPECT_EQ(p->pool_for(MiB + 512), Pool::large);
  EXPECT_EQ(p->segment_size(512), 2 * MiB);
  EXPECT_EQ(p->segment_size(MiB), 2 * MiB);
  EXPECT_EQ(p->segment_size(MiB + 512), 20 * MiB);
  EXPECT_EQ(p->segment_size(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(p->segment_size(10 * MiB), 10 * MiB);
  EXPECT_EQ(p->segment_size(10 * MiB + 512), 12 * MiB);
}

TEST(PytorchPolicyRules, SplitThresholds) {
  auto p = pytorch();
  EXPECT_TRUE(p->should_split(Pool::small, 2 * MiB, 2 * MiB - 512));
  EXPECT_FALSE(p->should_split(Pool::small, 1024, 1024));
  EXPECT_FALSE(p->should_split(Pool::large, 20 * MiB, 19 * MiB)) << "1 MiB is not more than 1 MiB";
  EXPECT_TRUE(p->should_split(Pool::large, 20 * MiB, 19 * MiB - 512));
}

TEST(PytorchPolicyRules, MaxSplitSizeKeepsOversizeBlocksWhole) {
  auto p = pytorch(64 * MiB);
  EXPECT_FALSE(p->may_serve(Pool::large, 64 * MiB, 2 * MiB)) << "small request, oversize block";
  EXPECT_TRUE(p->may_serve(Pool::large, 80 * MiB, 64 * MiB)) << "wastes 16 MiB < 20 MiB";
  EXPECT_FALSE(p->may_serve(Pool::large, 84 * MiB, 64 * MiB)) << "would waste 20 MiB";
  EXPECT_FALSE(p->should_split(Pool::large, 100 * MiB, 70 * MiB));
}

// Through the allocator: a 1 MiB and a 1.5 MiB request reserve a 2 MiB and a 20
// MiB segment.
TEST(PytorchPolicyRules, AllocatorReservesDocumentedSegments) {
  Harness h = make_harness({"pytorch", Upstream::simulated}, GiB);
  Block a = h.allocator->allocate(MiB);
  Block b = h.allocator->allocate(MiB + MiB / 2);
  EXPECT_EQ(h.allocator->stats().reserved_bytes.current, static_cast<std::int64_t>(22 * MiB));
  EXPECT_EQ(h.simulated->used_bytes(), 22 * MiB);
  h.allocator->deallocate(a);
  h.allocator->deallocate(b);
}

// best_fit reserves only the request rounded to 2 MiB, and keeps small requests
// in small segments.
TEST(BestFitPolicyRules, ReservesRequestRoundedTo2MiBAndSeparatesSmallRequests) {
  Harness h = make_harness({"best_fit", Upstream::simulated}, GiB);
  // A 200 MiB peak first, so that nothing below is released to hold the peak.
  h.allocator->deallocate(h.allocator->allocate(200 * MiB));
  h.allocator->empty_cache();
  Block big = h.allocator->allocate(100 * MiB);
  h.allocator->deallocate(big);
  Block small = h.allocator->allocate(10 * KiB);
  EXPECT_EQ(h.allocator->stats().reserved_bytes.current, static_cast<std::int64_t>(102 * MiB))
      << "the 10 KiB tensor gets its own 2 MiB segment instead of pinning the "
         "100 MiB one";
  Block again = h.allocator->allocate(100 * MiB);
  EXPECT_EQ(again.ptr, big.ptr);
  h.allocator->deallocate(small);
  h.allocator->deallocate(again);
  Block mid = h.allocator->allocate(3 * MiB);
  EXPECT_EQ(h.allocator->stats().reserved_bytes.current, static_cast<std::int64_t>(102 * MiB))
      << "3 MiB is carved from the cached 100 MiB block, no new segment";
  h.allocator->deallocate(mid);
}

TEST(VmmStitchPolicyRules, LargeRequestsAreWholePages) {
  AllocatorOptions o;
  o.policy = "vmm_stitch";
  auto p = make_policy(o, 2 * MiB);
  EXPECT_EQ(p->round_size(MiB + 1), 2 * MiB);
  EXPECT_EQ(p->round_size(5 * MiB), 6 * MiB);
  EXPECT_EQ(p->round_size(1000), 1024u);
  EXPECT_FALSE(p->should_split(Pool::large, 6 * MiB, 5 * MiB));
  EXPECT_TRUE(p->should_split(Pool::large, 8 * MiB, 6 * MiB));
  EXPECT_THROW(make_policy(o, 0), std::invalid_argument);
}

TEST(NoCachePolicyRules, EveryFreeGoesUpstream) {
  Harness h = make_harness({"no_cache", Upstream::simulated}, GiB);
  Block a = h.allocator->allocate(1000);
  EXPECT_EQ(h.simulated->used_bytes(), 1024u);
  h.allocator->deallocate(a);
  EXPECT_EQ(h.simulated->used_bytes(), 0u);
  EXPECT_EQ(h.allocator->stats().num_device_free, 1);
}

// Note [Garbage collection threshold]: a new segment that would take reserved
// memory past threshold x capacity first releases cached segments.
TEST(GarbageCollectionThreshold, ReleasesCacheBeforeCrossingTheThreshold) {
  AllocatorOptions o;
  o.garbage_collection_threshold = 0.5;
  // pytorch: best_fit's own peak holding would release the cache here without
  // any threshold.
  Harness h = make_harness({"pytorch", Upstream::simulated}, GiB, o);
  h.allocator->deallocate(h.allocator->allocate(400 * MiB));
  EXPECT_EQ(h.simulated->used_bytes(), 400 * MiB) << "cached below the threshold";
  Block b = h.allocator->allocate(500 * MiB);
  EXPECT_EQ(h.simulated->used_bytes(), 500 * MiB) << "400 + 500 MiB > 512 MiB: cache released";
  EXPECT_EQ(h.allocator->stats().num_alloc_retries, 0) << "released before failing, not after";
  h.allocator->deallocate(b);

  Harness off = make_harness({"pytorch", Upstream::simulated}, GiB);
  off.allocator->deallocate(off.allocator->allocate(400 * MiB));
  Block c = off.allocator->allocate(500 * MiB);
  EXPECT_EQ(off.simulated->used_bytes(), 900 * MiB) << "without the threshold the cache stays";
  off.allocator->deallocate(c);
}

// Note [Expandable segments]: a growing request reuses the space of the
// previous smaller one.
TEST(ExpandableSegments, GrowInPlaceAfterAFreedSmallerBlock) {
  Harness h = make_harness({"best_fit", Upstream::simulated_vm, true}, GiB);
  Block a = h.allocator->allocate(100 * MiB);
  h.allocator->deallocate(a);
  Block b = h.allocator->allocate(150 * MiB);
  EXPECT_EQ(b.ptr, a.ptr) << "same start address: the segment grew at its end";
  EXPECT_EQ(h.allocator->stats().reserved_bytes.current, static_cast<std::int64_t>(150 * MiB));
  EXPECT_EQ(h.vmm->physical_bytes(), 150 * MiB);
  h.allocator->deallocate(b);
  h.allocator->empty_cache();
  EXPECT_EQ(h.vmm->physical_bytes(), 0u);
  EXPECT_EQ(h.vmm->live_reservations(), 0u);

  Harness plain = make_harness({"pytorch", Upstream::simulated}, GiB);
  plain.allocator->deallocate(plain.allocator->allocate(100 * MiB));
  Block c = plain.allocator->allocate(150 * MiB);
  EXPECT_EQ(plain.allocator->stats().reserved_bytes.current, static_cast<std::int64_t>(250 * MiB))
      << "fixed segments strand the old 100 MiB";
  plain.allocator->deallocate(c);
}

// Note [Holding the peak] (best_fit_policy.cpp): a larger request releases the
// cached smaller segment before reserving, so the peak is the larger request
// alone; pytorch keeps both.
TEST(BestFitPolicyRules, NewSegmentAboveThePeakReleasesCachedSegmentsFirst) {
  Harness h = make_harness({"best_fit", Upstream::simulated}, GiB);
  h.allocator->deallocate(h.allocator->allocate(100 * MiB));
  Block b = h.allocator->allocate(150 * MiB);
  EXPECT_EQ(h.allocator->stats().reserved_bytes.peak, static_cast<std::int64_t>(150 * MiB));
  EXPECT_EQ(h.simulated->used_bytes(), 150 * MiB);
  h.allocator->deallocate(b);
  // Below the peak the cache is kept: 100 MiB is carved from the cached 150 MiB
  // block.
  Block c = h.allocator->allocate(100 * MiB);
  EXPECT_EQ(h.allocator->stats().num_device_alloc, 2);
  h.allocator->deallocate(c);

  Harness torch = make_harness({"pytorch", Upstream::simulated}, GiB);
  torch.allocator->deallocate(torch.allocator->allocate(100 * MiB));
  Block d = torch.allocator->allocate(150 * MiB);
  EXPECT_EQ(torch.allocator->stats().reserved_bytes.peak, static_cast<std::int64_t>(250 * MiB));
  torch.allocator->deallocate(d);
}

}  // namespace
}  // namespace memtrain::memory
