// make_gradient_buckets: PyTorch DDP's bucket_cap_mb rule (consecutive gradients share a bucket
// until the next would overflow it; a larger one is a bucket of its own), in the given order,
// with exactly the gradients' bytes under tag gradient.
#include "comms/gradient_bucket.hpp"
#include "comms/shard_layout.hpp"

#include <gtest/gtest.h>

#include <memory>

#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"
#include "tests/core/test_allocator.hpp"

namespace memtrain::comms {
namespace {

using memtrain::testing::TestAllocator;

std::vector<GradientSpec> specs() {
  // numel 6, 10, 3, 40, 2 in the order backward finishes them.
  return {{7, "a", {2, 3}}, {3, "b", {10}}, {5, "c", {3}}, {0, "d", {4, 10}}, {1, "e", {2}}};
}

TEST(GradientBuckets, FillInOrderUntilTheNextGradientWouldOverflowTheCap) {
  auto alloc = std::make_shared<TestAllocator>();
  core::Context ctx(alloc);
  // 80 bytes = 20 f32: a + b = 16 fit, c would make 19 (fits), d (40) overflows and is alone,
  // e starts the last one.
  const auto buckets = make_gradient_buckets(ctx, specs(), core::DType::f32, 80);
  ASSERT_EQ(buckets.size(), 3u);
  ASSERT_EQ(buckets[0].entries.size(), 3u);
  EXPECT_EQ(buckets[0].entries[0].key, 7u);
  EXPECT_EQ(buckets[0].entries[1].offset, 6);
  EXPECT_EQ(buckets[0].entries[2].offset, 16);
  EXPECT_EQ(buckets[0].buffer.numel(), 19);
  EXPECT_EQ(buckets[1].entries.size(), 1u);
  EXPECT_EQ(buckets[1].entries[0].name, "d");
  EXPECT_EQ(buckets[1].buffer.numel(), 40);  // larger than the cap: alone
  EXPECT_EQ(buckets[2].entries[0].key, 1u);
  EXPECT_EQ(buckets[2].entries[0].shape, (std::vector<std::int64_t>{2}));
  // No padding: the buckets hold 61 floats, zeroed, under tag gradient.
  EXPECT_EQ(alloc->live_bytes(core::tags().gradient), 61 * 4);
  for (const auto& b : buckets) {
    for (std::int64_t i = 0; i < b.buffer.numel(); ++i) EXPECT_EQ(b.buffer.data<float>()[i], 0.0f);
  }
}

TEST(GradientBuckets, ACapBelowEveryGradientGivesOneBucketEach) {
  auto alloc = std::make_shared<TestAllocator>();
  core::Context ctx(alloc);
  const auto buckets = make_gradient_buckets(ctx, specs(), core::DType::bf16, 1);
  ASSERT_EQ(buckets.size(), 5u);
  for (const auto& b : buckets) {
    EXPECT_EQ(b.entries.size(), 1u);
    EXPECT_EQ(b.entries[0].offset, 0);
    EXPECT_EQ(b.buffer.dtype(), core::DType::bf16);
  }
  EXPECT_EQ(alloc->live_bytes(core::tags().gradient), 61 * 2);
}

TEST(GradientBuckets, AHugeCapGivesOneBucketAndANonPositiveCapIsAnError) {
  auto alloc = std::make_shared<TestAllocator>();
  core::Context ctx(alloc);
  EXPECT_EQ(make_gradient_buckets(ctx, specs(), core::DType::f32, 1 << 30).size(), 1u);
  EXPECT_THROW(make_gradient_buckets(ctx, specs(), core::DType::f32, 0), RuntimeError);
}

// ZeRO-1's blocks: s = ceil(n / P) each, the remainder on the last ones, nothing padded.
TEST(ShardLayout, BlocksAreCeilOfNOverRanksWithTheRestOnTheLast) {
  EXPECT_EQ(shard_counts(10, 4), (std::vector<std::int64_t>{3, 3, 3, 1}));
  EXPECT_EQ(shard_counts(12, 4), (std::vector<std::int64_t>{3, 3, 3, 3}));
  EXPECT_EQ(shard_counts(5, 4), (std::vector<std::int64_t>{2, 2, 1, 0}));
  EXPECT_EQ(shard_counts(1, 3), (std::vector<std::int64_t>{1, 0, 0}));
  EXPECT_EQ(shard_counts(0, 2), (std::vector<std::int64_t>{0, 0}));
  EXPECT_EQ(shard_counts(7, 1), (std::vector<std::int64_t>{7}));
  for (std::int64_t n : {1, 9, 1000, 80037}) {
    for (int P : {1, 2, 3, 4, 8}) {
      const auto c = shard_counts(n, P);
      EXPECT_EQ(shard_offset(c, P), n) << n << " over " << P;
      EXPECT_EQ(c[0], (n + P - 1) / P);
    }
  }
  EXPECT_EQ(shard_offset(shard_counts(10, 4), 3), 9);
  EXPECT_THROW(shard_counts(-1, 2), RuntimeError);
  EXPECT_THROW(shard_counts(4, 0), RuntimeError);
  EXPECT_THROW(check_block_counts({1, 2}, 3, "test"), RuntimeError);
  EXPECT_THROW(check_block_counts({1, -2}, 2, "test"), RuntimeError);
}

}  // namespace
}  // namespace memtrain::comms
