// GradientSynchronizer in one process, over a pretend group of two ranks whose other rank's
// gradients are known (FakeGroup): which buckets are summed, when, on which thread, to which
// bits, and what a failing collective does.
#include "comms/gradient_synchronizer.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "comms/onebit_compressor.hpp"
#include "comms/powersgd_compressor.hpp"
#include "comms/simulated_world_communicator.hpp"
#include "kernels/cpu/half_convert.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"
#include "tests/core/test_allocator.hpp"

namespace memtrain::comms {
namespace {

using memtrain::testing::TestAllocator;

// A group of two in which the other rank holds `other` (element i of every f32 all-reduce
// gets other(i) added). Records each call's size and thread; can fail on call `fail_at` or
// hold every call until release().
class FakeGroup final : public SimulatedWorldCommunicator {
 public:
  FakeGroup() : SimulatedWorldCommunicator(2, "fake") {}
  void allreduce_sum(float* d, std::int64_t n) override {
    std::unique_lock<std::mutex> lock(mutex_);
    const int call = static_cast<int>(sizes_.size());
    sizes_.push_back(n);
    threads_.push_back(std::this_thread::get_id());
    changed_.notify_all();
    changed_.wait(lock, [this] { return !held_; });
    if (call == fail_at) throw RuntimeError("MPI_Allreduce: MPI_ERR_TRUNCATE (fake)");
    for (std::int64_t i = 0; i < n; ++i) {
      d[i] = twin ? 2.0f * d[i] : d[i] + 0.25f + 0.5f * static_cast<float>(i % 7);
    }
  }
  // Waits up to 60 s for `calls` calls; false if they did not come.
  bool wait_for_calls(std::size_t calls) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(60), [&] { return sizes_.size() >= calls; });
  }
  void hold() { held_ = true; }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      held_ = false;
    }
    changed_.notify_all();
  }
  std::vector<std::int64_t> sizes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return sizes_;
  }
  std::vector<std::thread::id> threads() {
    std::lock_guard<std::mutex> lock(mutex_);
    return threads_;
  }
  int fail_at = -1;
  // The other rank holds what this one holds (its sum doubles each element, wherever the
  // element sits in the call): an element summed twice, or never, shows.
  bool twin = false;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool held_ = false;
  std::vector<std::int64_t> sizes_;
  std::vector<std::thread::id> threads_;
};

float other(std::int64_t i) { return 0.25f + 0.5f * static_cast<float>(i % 7); }

// Three buckets of at most 10 elements: keys {10, 11} (numel 6 + 4), {12} (5), {13, 14} (6 + 2).
std::vector<GradientBucket> three_buckets(core::Context& ctx, core::DType dtype) {
  const std::vector<GradientSpec> specs = {
      {10, "w10", {2, 3}}, {11, "w11", {4}}, {12, "w12", {5}}, {13, "w13", {2, 3}}, {14, "w14", {2}}};
  const auto element = static_cast<std::int64_t>(core::dtype_size(dtype));
  return make_gradient_buckets(ctx, specs, dtype, 10 * element);
}

void fill(GradientBucket& b, float base) {
  for (std::int64_t i = 0; i < b.buffer.numel(); ++i) {
    const float x = base + 0.1f * static_cast<float>(i);
    if (b.buffer.dtype() == core::DType::f32) {
      b.buffer.data<float>()[i] = x;
    } else {
      std::uint32_t bits;
      std::memcpy(&bits, &x, 4);
      b.buffer.data<std::uint16_t>()[i] = static_cast<std::uint16_t>(bits >> 16);  // exact: truncated
    }
  }
}

// bfloat16 round to nearest even of a finite float, from its bits (the closed form).
std::uint16_t round_bf16(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return static_cast<std::uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}
float from_bf16(std::uint16_t h) {
  const std::uint32_t bits = std::uint32_t{h} << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

TEST(GradientSynchronizer, ABucketIsSummedOnTheCommunicationThreadOnceItsLastGradientIsFinal) {
  auto alloc = std::make_shared<TestAllocator>();
  core::Context ctx(alloc);
  auto buckets = three_buckets(ctx, core::DType::f32);
  FakeGroup group;
  GradientSynchronizer sync(buckets, group, ctx);
  ASSERT_TRUE(sync.overlaps());
  sync.begin_step();
  sync.mark_ready(12);  // bucket 1 complete: queued at once
  ASSERT_TRUE(group.wait_for_calls(1)) << "the communication thread did not start bucket 1";
  sync.mark_ready(10);  // bucket 0 waits for 11
  EXPECT_EQ(sync.queue_order(), (std::vector<int>{1}));
  sync.mark_ready(11);
  ASSERT_TRUE(group.wait_for_calls(2));
  EXPECT_EQ(group.sizes(), (std::vector<std::int64_t>{5, 10}));
  sync.finish();  // queues bucket 2, never announced
  EXPECT_EQ(sync.queue_order(), (std::vector<int>{1, 0, 2}));
  EXPECT_EQ(group.sizes(), (std::vector<std::int64_t>{5, 10, 8}));
  for (auto id : group.threads()) EXPECT_NE(id, std::this_thread::get_id());
  EXPECT_EQ(sync.step_stats().bytes, 23 * 4);
  EXPECT_EQ(sync.step_stats().calls, 3);
  EXPECT_GE(sync.step_stats().exposed_s, 0.0);
}

TEST(GradientSynchronizer, AnUnknownOrRepeatedKeyIsAnError) {
  auto alloc = std::make_shared<TestAllocator>();
  core::Context ctx(alloc);
  auto buckets = three_buckets(ctx, core::DType::f32);
  FakeGroup group;
  GradientSynchronizer sync(buckets, group, ctx);
  sync.begin_step();
  EXPECT_THROW(sync.mark_ready(99), RuntimeError);
  sync.mark_ready(13);
  EXPECT_THROW(sync.mark_ready(13), RuntimeError);
  sync.finish();
  sync.begin_step();  // a new step: 13 may be announced again
  EXPECT_NO_THROW(sync.mark_ready(13));
  sync.finish();
}

// f32 buckets are summed in place; 16-bit ones in f32 and rounded once (Note [16-bit gradients
// are summed in f32]); with or without the thread, to the same bits.
TEST(GradientSynchronizer, SumsAreTheRanksSumRoundedOnceWithOrWithoutOverlap) {
  for (core::DType dtype : {core::DType::f32, core::DType::bf16}) {
    for (bool overlap : {true, false}) {
      auto alloc = std::make_shared<TestAllocator>();
      core::Context ctx(alloc);
      auto buckets = three_buckets(ctx, dtype);
      for (std::size_t b = 0; b < buckets.size(); ++b) fill(buckets[b], 1.0f + static_cast<float>(b));
      FakeGroup group;
      GradientSynchronizer sync(buckets, group, ctx, overlap);
      EXPECT_EQ(sync.overlaps(), overlap);
      EXPECT_EQ(sync.staging_bytes(), dtype == core::DType::f32 ? 0u : 10u * 4);
      sync.begin_step();
      for (std::size_t key : {10, 11, 12, 13, 14}) sync.mark_ready(key);
      sync.finish();
      for (std::size_t b = 0; b < buckets.size(); ++b) {
        for (std::int64_t i = 0; i < buckets[b].buffer.numel(); ++i) {
          const float mine = 1.0f + static_cast<float>(b) + 0.1f * static_cast<float>(i);
          if (dtype == core::DType::f32) {
            EXPECT_EQ(buckets[b].buffer.data<float>()[i], mine + other(i));
          } else {
            std::uint32_t bits;
            std::memcpy(&bits, &mine, 4);
            const float truncated = from_bf16(static_cast<std::uint16_t>(bits >> 16));
            EXPECT_EQ(buckets[b].buffer.data<std::uint16_t>()[i], round_bf16(truncated + other(i)))
                << "bucket " << b << " element " << i;
          }
        }
      }
    }
  }
}

// A failing collective: finish() reports it (with the collective's own message) instead of
// returning gradients that are not a sum, the buckets queued after it are not summed, and
// nothing hangs.
TEST(GradientSynchronizer, AFailedCollectiveReachesTheTrainingThread) {
  for (bool overlap : {true, false}) {
    auto alloc = std::make_shared<TestAllocator>();
    core::Context ctx(alloc);
    auto buckets = three_buckets(ctx, core::DType::f32);
    FakeGroup group;
    group.fail_at = 0;
    GradientSynchronizer sync(buckets, group, ctx, overlap);
    sync.begin_step();
    try {
      sync.finish();
      ADD_FAILURE() << "finish() returned after a failed collective";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("gradient synchronisation failed"), std::string::npos);
      EXPECT_NE(std::string(e.what()).find("MPI_ERR_TRUNCATE (fake)"), std::string::npos);
    }
    EXPECT_EQ(group.sizes().size(), 1u) << "buckets after the failure were summed";
  }
}

// finish() waits for the communication thread: it cannot return while a sum is in flight.
TEST(GradientSynchronizer, FinishWaitsForTheBucketsInFlight) {
  auto alloc = std::make_shared<TestAllocator>();
  core::Context ctx(alloc);
  auto buckets = three_buckets(ctx, core::DType::f32);
  FakeGroup group;
  GradientSynchronizer sync(buckets, group, ctx);
  group.hold();
  sync.begin_step();
  sync.mark_ready(12);
  ASSERT_TRUE(group.wait_for_calls(1));
  std::atomic<bool> finished{false};
  std::thread t([&] {
    sync.finish();
    finished = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(finished.load());
  group.release();
  t.join();
  EXPECT_TRUE(finished.load());
  EXPECT_EQ(group.sizes().size(), 3u);
}

// A dry run communicates nothing and allocates the compute run's staging buffer.
TEST(GradientSynchronizer, ADryRunAllocatesTheStagingBufferAndSendsNothing) {
  auto alloc = std::make_shared<TestAllocator>(/*backs_memory=*/false);
  core::Context ctx(alloc);
  ctx.set_dry_run(true);
  auto buckets = three_buckets(ctx, core::DType::bf16);
  FakeGroup group;
  GradientSynchronizer sync(buckets, group, ctx);
  EXPECT_FALSE(sync.overlaps());
  EXPECT_EQ(alloc->live_bytes(core::tags().communication), 10 * 4);
  sync.begin_step();
  sync.mark_ready(12);
  sync.finish();
  EXPECT_TRUE(group.sizes().empty());
  EXPECT_EQ(sync.step_stats().bytes, 0);
}

// One bucket of a [3] gradient, a [rows, cols] table marked split_rows, and a [2] gradient.
std::vector<GradientBucket> split_bucket(core::Context& ctx, core::DType dtype, std::int64_t rows, std::int64_t cols) {
  const std::vector<GradientSpec> specs = {
      {20, "a", {3}}, {21, "table", {rows, cols}, /*split_rows=*/true}, {22, "b", {2}}};
  return make_gradient_buckets(ctx, specs, dtype, std::int64_t{1} << 40);
}

std::vector<float> iota(core::Tensor& t) {
  std::vector<float> v(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 1.0f + static_cast<float>(i % 1000);
  std::memcpy(t.data<float>(), v.data(), v.size() * 4);
  return v;
}

// Note [The tied embedding's rows are summed in two parts]: the row mask, then the rows outside
// the late ones (short runs packed into one staging call) while backward goes on, then the
// rest of the bucket; every element summed exactly once.
TEST(GradientSynchronizer, ASplitEntrySumsItsEarlyRowsFirstAndEveryElementOnce) {
  auto alloc = std::make_shared<TestAllocator>();
  core::Context ctx(alloc);
  auto buckets = split_bucket(ctx, core::DType::f32, 6, 4);  // [3 | 6 x 4 | 2] = 29 elements
  const std::vector<float> before = iota(buckets[0].buffer);
  FakeGroup group;
  group.twin = true;
  GradientSynchronizer sync(buckets, group, ctx);
  EXPECT_EQ(sync.row_mask_bytes(), 6u * 4);
  EXPECT_EQ(sync.staging_bytes(), 24u * 4);
  EXPECT_EQ(alloc->live_bytes(core::tags().communication), (6 + 24) * 4);
  sync.begin_step();
  sync.mark_ready(20);
  sync.mark_rows_ready(21, {4, 1, 1});
  ASSERT_TRUE(group.wait_for_calls(2));
  // The mask (6 rows), then rows 0, 2, 3 and 5 packed: 4 + 8 + 4 elements.
  EXPECT_EQ(group.sizes(), (std::vector<std::int64_t>{6, 16}));
  sync.mark_ready(21);
  sync.mark_ready(22);
  sync.finish();
  // The rest: a, rows 1 and 4, b = 3 + 4 + 4 + 2.
  EXPECT_EQ(group.sizes(), (std::vector<std::int64_t>{6, 16, 13}));
  const float* g = buckets[0].buffer.data<float>();
  for (std::size_t i = 0; i < before.size(); ++i) EXPECT_EQ(g[i], 2.0f * before[i]) << "element " << i;
  EXPECT_EQ(sync.early_rows(), 4);
  EXPECT_EQ(sync.step_stats().bytes, (6 + 16 + 13) * 4);
  EXPECT_EQ(sync.step_stats().calls, 3);
  EXPECT_EQ(sync.queue_order(), (std::vector<int>{0}));
}

// Runs of kInPlaceElements or more go in place, one call each.
TEST(GradientSynchronizer, LongRowRangesOfASplitEntryAreSummedInPlace) {
  auto alloc = std::make_shared<TestAllocator>();
  core::Context ctx(alloc);
  const std::int64_t cols = GradientSynchronizer::kInPlaceElements;
  auto buckets = split_bucket(ctx, core::DType::f32, 4, cols);
  const std::vector<float> before = iota(buckets[0].buffer);
  FakeGroup group;
  group.twin = true;
  GradientSynchronizer sync(buckets, group, ctx);
  sync.begin_step();
  sync.mark_rows_ready(21, {1});
  for (std::size_t key : {20, 21, 22}) sync.mark_ready(key);
  sync.finish();
  // Mask; row 0; rows 2-3; then a + b packed (5) and row 1 in place.
  EXPECT_EQ(group.sizes(), (std::vector<std::int64_t>{4, cols, 2 * cols, cols, 5}));
  const float* g = buckets[0].buffer.data<float>();
  for (std::size_t i = 0; i < before.size(); ++i) ASSERT_EQ(g[i], 2.0f * before[i]) << "element " << i;
}

// Where a split cannot happen (16-bit buckets, no communication thread) the first
// announcement changes nothing: the bucket is summed whole; bad announcements are errors.
TEST(GradientSynchronizer, ASplitIsIgnoredWhereItCannotHappenAndBadRowsAreErrors) {
  for (bool overlap : {true, false}) {
    auto alloc = std::make_shared<TestAllocator>();
    core::Context ctx(alloc);
    auto buckets = split_bucket(ctx, core::DType::f32, 6, 4);
    const std::vector<float> before = iota(buckets[0].buffer);
    FakeGroup group;
    group.twin = true;
    GradientSynchronizer sync(buckets, group, ctx, overlap);
    // Allocated with or without overlap: a dry run allocates what a compute run does.
    EXPECT_EQ(sync.row_mask_bytes(), 6u * 4);
    sync.begin_step();
    EXPECT_THROW(sync.mark_rows_ready(20, {0}), RuntimeError);  // not split_rows
    EXPECT_THROW(sync.mark_rows_ready(99, {0}), RuntimeError);  // unknown
    EXPECT_THROW(sync.mark_rows_ready(21, {6}), RuntimeError);  // outside [0, 6)
    EXPECT_THROW(sync.mark_rows_ready(21, {-1}), RuntimeError);
    sync.mark_rows_ready(21, {2});
    if (overlap) {
      EXPECT_THROW(sync.mark_rows_ready(21, {2}), RuntimeError);  // twice
    }
    sync.finish();
    if (overlap) {
      EXPECT_EQ(group.sizes().size(), 3u);
    } else {
      EXPECT_EQ(group.sizes(), (std::vector<std::int64_t>{29}));
    }
    const float* g = buckets[0].buffer.data<float>();
    for (std::size_t i = 0; i < before.size(); ++i) ASSERT_EQ(g[i], 2.0f * before[i]);
  }
  auto alloc = std::make_shared<TestAllocator>();
  core::Context ctx(alloc);
  auto half = split_bucket(ctx, core::DType::bf16, 6, 4);
  FakeGroup group;
  GradientSynchronizer sync(half, group, ctx);
  EXPECT_EQ(sync.row_mask_bytes(), 0u);
  sync.begin_step();
  sync.mark_rows_ready(21, {2});
  sync.finish();
  EXPECT_EQ(group.sizes(), (std::vector<std::int64_t>{29}));
}

// PowerSGD behind the synchroniser: plain sums before start_iter, the compressed sum from it
// on (Note [PowerSGD sums, it does not average]), with the payload and what it replaced
// counted; no early rows (the table is compressed whole); ZeRO-1 refused.
TEST(GradientSynchronizer, CompressionStartsAtItsIterationAndCountsBothPayloads) {
  for (bool overlap : {true, false}) {
    auto alloc = std::make_shared<TestAllocator>();
    core::Context ctx(alloc);
    auto buckets = split_bucket(ctx, core::DType::f32, 6, 4);  // [3 | 6 x 4 | 2]
    FakeGroup group;
    group.twin = true;
    GradientSynchronizer::Compression compression;
    compression.make = powersgd_factory(PowerSgdOptions{.rank = 4, .min_compression_rate = 1e-9});
    compression.start_iter = 1;
    GradientSynchronizer sync(buckets, group, ctx, overlap, GradientReduction::all_reduce, &compression);
    EXPECT_EQ(sync.row_mask_bytes(), 0u);
    for (std::int64_t step = 0; step < 3; ++step) {
      const std::vector<float> before = iota(buckets[0].buffer);
      sync.begin_step(step);
      sync.mark_rows_ready(21, {1});  // ignored: no split under compression
      for (std::size_t key : {20, 21, 22}) sync.mark_ready(key);
      sync.finish();
      const float* g = buckets[0].buffer.data<float>();
      for (std::size_t i = 0; i < before.size(); ++i) {
        EXPECT_NEAR(g[i], 2.0f * before[i], 1e-5f * 2.0f * before[i]) << "step " << step << " element " << i;
      }
      EXPECT_EQ(sync.step_stats().uncompressed_bytes, 29 * 4);
      // From start_iter: the uncompressed 1-D entries (5), then P (6 x 4) and Q (4 x 4).
      EXPECT_EQ(sync.step_stats().bytes, step < 1 ? 29 * 4 : (5 + 24 + 16) * 4) << "step " << step;
    }
  }
  auto alloc = std::make_shared<TestAllocator>();
  core::Context ctx(alloc);
  auto buckets = split_bucket(ctx, core::DType::f32, 6, 4);
  FakeGroup group;
  GradientSynchronizer::Compression compression;
  compression.make = powersgd_factory(PowerSgdOptions{});
  EXPECT_THROW(GradientSynchronizer(buckets, group, ctx, true, GradientReduction::reduce_scatter, &compression),
               RuntimeError);
}

// Note [16-bit gradients are compressed in f32]: a bf16 bucket goes whole through the f32
// staging buffer (its own size, tag communication) and back, for PowerSGD at full rank (the sum
// exactly, up to bf16 rounding) and for 1-bit (the staging only: its sum needs an all-to-all).
TEST(GradientSynchronizer, SixteenBitBucketsAreCompressedInF32) {
  for (std::string method : {"powersgd", "onebit"}) {
    auto alloc = std::make_shared<TestAllocator>();
    core::Context ctx(alloc);
    auto buckets = split_bucket(ctx, core::DType::bf16, 6, 4);  // [3 | 6 x 4 | 2]
    FakeGroup group;
    group.twin = true;
    GradientSynchronizer::Compression compression;
    compression.make = method == "powersgd" ? powersgd_factory(PowerSgdOptions{.rank = 4, .min_compression_rate = 1e-9})
                                            : onebit_factory(OneBitOptions{});
    compression.start_iter = 0;
    const std::size_t before = alloc->live_bytes(core::tags().communication);
    GradientSynchronizer sync(buckets, group, ctx, false, GradientReduction::all_reduce, &compression);
    ASSERT_NE(sync.compressor(), nullptr);
    // The staging buffer of Note [16-bit gradients are summed in f32] (29 elements) and the
    // compression one (29 elements), beside the compressor's own state.
    EXPECT_EQ(alloc->live_bytes(core::tags().communication) - before,
              2u * 29 * 4 + static_cast<std::size_t>(sync.compressor()->state_bytes()));
    if (method != "powersgd") continue;
    std::vector<float> values(29);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = 1.0f + static_cast<float>(i);  // exact in bf16
    std::uint16_t* g = buckets[0].buffer.data<std::uint16_t>();
    kernels::convert_float_to_half(g, values.data(), 29, kernels::HalfFormat::bf16);
    sync.begin_step(0);
    for (std::size_t key : {20, 21, 22}) sync.mark_ready(key);
    sync.finish();
    std::vector<float> out(29);
    kernels::convert_half_to_float(out.data(), g, 29, kernels::HalfFormat::bf16);
    for (std::size_t i = 0; i < 29; ++i) EXPECT_NEAR(out[i], 2.0f * values[i], 2.0f * values[i] / 128) << i;
    EXPECT_EQ(sync.step_stats().uncompressed_bytes, 29 * 4);
  }
}

TEST(GradientSynchronizer, TwoSplitEntriesAreAnError) {
  auto alloc = std::make_shared<TestAllocator>();
  core::Context ctx(alloc);
  const std::vector<GradientSpec> specs = {{1, "x", {2, 2}, true}, {2, "y", {2, 2}, true}};
  auto buckets = make_gradient_buckets(ctx, specs, core::DType::f32, 1 << 20);
  FakeGroup group;
  EXPECT_THROW(GradientSynchronizer(buckets, group, ctx), RuntimeError);
}

}  // namespace
}  // namespace memtrain::comms
