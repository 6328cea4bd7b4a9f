// PowerSgdCompressor in one process: over one rank, or over a pretend group of two whose other
// rank holds the same gradients (its all-reduce doubles). References: the exact sum (rank =
// min(n, m) makes the projection the identity), the telescoping identity of error feedback,
// the byte formula (n + m) r per matrix, and a run that never saw a skipped step.
#include "comms/powersgd_compressor.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "comms/simulated_world_communicator.hpp"
#include "comms/single_rank_communicator.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"
#include "tests/core/test_allocator.hpp"

namespace memtrain::comms {
namespace {

using memtrain::testing::TestAllocator;

class TwinGroup final : public SimulatedWorldCommunicator {
 public:
  TwinGroup() : SimulatedWorldCommunicator(2, "twin") {}
  void allreduce_sum(float* d, std::int64_t n) override {
    for (std::int64_t i = 0; i < n; ++i) d[i] *= 2.0f;
  }
};

struct Rig {
  explicit Rig(std::vector<GradientSpec> specs, core::DType dtype = core::DType::f32)
      : alloc(std::make_shared<TestAllocator>()),
        ctx(alloc),
        buckets(make_gradient_buckets(ctx, specs, dtype, std::int64_t{1} << 40)) {}
  float* grad() { return buckets[0].buffer.data<float>(); }
  std::int64_t numel() const { return buckets[0].buffer.numel(); }
  std::shared_ptr<TestAllocator> alloc;
  core::Context ctx;
  std::vector<GradientBucket> buckets;
};

std::vector<float> random_values(std::int64_t n, unsigned seed, float scale = 1e-3f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = normal(gen);
  return v;
}

double norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

// With r = min(n, m) the compressed sum is the all-reduce (Note [PowerSGD sums, it does not
// average]); the error is what rounding left; a 1-D entry travels uncompressed, exactly.
TEST(PowerSgdCompressor, FullRankIsTheExactSum) {
  Rig rig({{1, "w", {6, 4}}, {2, "b", {5}}, {3, "narrow", {3, 8}}});
  PowerSgdOptions o;
  o.rank = 4;  // clipped to 3 for the [3, 8] entry
  o.min_compression_rate = 1e-9;
  PowerSgdCompressor c(rig.buckets, o, rig.ctx);
  ASSERT_EQ(c.matrices(0).size(), 2u);
  EXPECT_EQ(c.matrices(0)[0].r, 4);
  EXPECT_EQ(c.matrices(0)[1].r, 3);
  TwinGroup group;
  for (std::int64_t step = 0; step < 3; ++step) {
    const auto g0 = random_values(rig.numel(), 7 + static_cast<unsigned>(step));
    std::memcpy(rig.grad(), g0.data(), g0.size() * 4);
    GradientSyncStats stats;
    c.sum(0, rig.grad(), group, step, stats);
    for (std::int64_t i = 0; i < rig.numel(); ++i) {
      const float want = 2.0f * g0[static_cast<std::size_t>(i)];
      if (i >= 24 && i < 29) {
        EXPECT_EQ(rig.grad()[i], want) << "uncompressed element " << i;
      } else {
        EXPECT_NEAR(rig.grad()[i], want, 1e-5f * 1e-3f) << "step " << step << " element " << i;
      }
    }
    for (const auto& mat : c.matrices(0)) {
      const float* e = mat.error.data<float>();
      for (std::int64_t i = 0; i < mat.n * mat.m; ++i) EXPECT_NEAR(e[i], 0.0f, 1e-5f * 1e-3f);
    }
  }
}

// Error feedback: the applied sums lag the true sums by exactly the error (sum_t g_t -
// sum_t applied_t = e_T, a telescoping sum), and the error stays bounded while gradients that
// keep their direction pile up: the point of error feedback (Vogels et al. 2019, section 3;
// Karimireddy et al. 2019, Lemma 3).
TEST(PowerSgdCompressor, ErrorFeedbackKeepsTheLostPartOfTheSumBounded) {
  Rig rig({{1, "w", {32, 16}}});
  PowerSgdOptions o;
  o.rank = 1;
  PowerSgdCompressor c(rig.buckets, o, rig.ctx);
  ASSERT_EQ(c.matrices(0).size(), 1u);
  SingleRankCommunicator one;
  const auto direction = random_values(rig.numel(), 1);  // full rank: rank 1 loses most of it
  std::vector<double> truth(static_cast<std::size_t>(rig.numel())), applied(truth.size());
  double lost_at_50 = 0, lost_at_100 = 0;
  for (std::int64_t step = 1; step <= 100; ++step) {
    auto g = random_values(rig.numel(), 100 + static_cast<unsigned>(step));
    for (std::size_t i = 0; i < g.size(); ++i) g[i] += direction[i];
    std::memcpy(rig.grad(), g.data(), g.size() * 4);
    GradientSyncStats stats;
    c.sum(0, rig.grad(), one, step, stats);
    std::vector<double> lost(truth.size()), minus_error(truth.size());
    const float* e = c.matrices(0)[0].error.data<float>();
    for (std::size_t i = 0; i < truth.size(); ++i) {
      truth[i] += g[i];
      applied[i] += rig.grad()[i];
      lost[i] = truth[i] - applied[i];
      minus_error[i] = lost[i] - e[i];
    }
    EXPECT_LE(norm(minus_error), 1e-4 * norm(truth)) << "step " << step;
    if (step == 50) lost_at_50 = norm(lost);
    if (step == 100) lost_at_100 = norm(lost);
  }
  // Without feedback the lost part would grow with the steps (rank 1 drops most of
  // `direction` every step: twice as much at step 100 as at 50); with it, it stays put.
  RecordProperty("lost_at_50", std::to_string(lost_at_50));
  RecordProperty("lost_at_100", std::to_string(lost_at_100));
  RecordProperty("truth", std::to_string(norm(truth)));
  EXPECT_LE(lost_at_100, 1.3 * lost_at_50);
  EXPECT_LE(lost_at_100, 0.25 * norm(truth));
}

// Bytes per call: the uncompressed entries together, then sum (n + m) r for P and for Q.
TEST(PowerSgdCompressor, PayloadIsTheUncompressedEntriesAndTheFactors) {
  Rig rig({{1, "w", {64, 32}}, {2, "b", {32}}, {3, "small", {4, 4}}, {4, "v", {128, 16}}});
  PowerSgdOptions o;
  o.rank = 4;
  PowerSgdCompressor c(rig.buckets, o, rig.ctx);
  // [4, 4]: (4 + 4) 4 = 32 is not below 16 / 2: uncompressed with the 1-D entry.
  ASSERT_EQ(c.matrices(0).size(), 2u);
  TwinGroup group;
  const auto g0 = random_values(rig.numel(), 3);
  std::memcpy(rig.grad(), g0.data(), g0.size() * 4);
  GradientSyncStats stats;
  c.sum(0, rig.grad(), group, 0, stats);
  const std::int64_t uncompressed = 32 + 16;
  const std::int64_t p = 64 * 4 + 128 * 4, q = 32 * 4 + 16 * 4;
  EXPECT_EQ(stats.bytes, (uncompressed + p + q) * 4);
  EXPECT_EQ(stats.calls, 3);
  EXPECT_EQ(rig.alloc->live_bytes(core::tags().communication), c.state_bytes());
  EXPECT_EQ(c.state_bytes(), (64 * 32 + 128 * 16 + q + p + uncompressed) * 4);
}

// Note [A non-finite step leaves PowerSGD's state untouched]: an overflowed step gives a
// non-finite sum (so the optimizer skips it) and the next step is bitwise that of a run that
// never saw it.
TEST(PowerSgdCompressor, ANonFiniteStepLeavesErrorsAndQUntouched) {
  const std::vector<GradientSpec> specs = {{1, "w", {16, 8}}, {2, "b", {8}}};
  Rig a(specs), b(specs);
  PowerSgdOptions o;
  o.rank = 2;
  PowerSgdCompressor ca(a.buckets, o, a.ctx), cb(b.buckets, o, b.ctx);
  TwinGroup group;
  GradientSyncStats stats;
  auto step = [&](Rig& rig, PowerSgdCompressor& c, const std::vector<float>& g, std::int64_t it) {
    std::memcpy(rig.grad(), g.data(), g.size() * 4);
    c.sum(0, rig.grad(), group, it, stats);
  };
  const auto g1 = random_values(a.numel(), 11), g3 = random_values(a.numel(), 13);
  auto bad = random_values(a.numel(), 12);
  bad[5] = std::numeric_limits<float>::infinity();
  step(a, ca, g1, 0);
  step(b, cb, g1, 0);
  step(a, ca, bad, 1);
  bool finite = true;
  for (std::int64_t i = 0; i < 128; ++i) finite = finite && std::isfinite(a.grad()[i]);
  EXPECT_FALSE(finite) << "an overflowed step must not look finite to the optimizer";
  step(a, ca, g3, 2);
  step(b, cb, g3, 2);
  EXPECT_EQ(std::memcmp(a.grad(), b.grad(), static_cast<std::size_t>(a.numel()) * 4), 0);
  EXPECT_EQ(std::memcmp(ca.matrices(0)[0].error.data<float>(), cb.matrices(0)[0].error.data<float>(), 16 * 8 * 4), 0);
}

// A zero gradient orthonormalises to zeros: no NaN anywhere.
TEST(PowerSgdCompressor, AZeroGradientGivesZerosNotNaN) {
  Rig rig({{1, "w", {16, 8}}});
  PowerSgdOptions o;
  o.rank = 2;
  PowerSgdCompressor c(rig.buckets, o, rig.ctx);
  TwinGroup group;
  std::memset(rig.grad(), 0, 16 * 8 * 4);
  GradientSyncStats stats;
  c.sum(0, rig.grad(), group, 0, stats);
  for (std::int64_t i = 0; i < 128; ++i) ASSERT_EQ(rig.grad()[i], 0.0f);
}

TEST(PowerSgdCompressor, BadOptionsAreErrors) {
  Rig f32({{1, "w", {16, 8}}});
  PowerSgdOptions o;
  o.rank = 0;
  EXPECT_THROW(PowerSgdCompressor(f32.buckets, o, f32.ctx), RuntimeError);
  o.rank = 4;
  o.min_compression_rate = 0;
  EXPECT_THROW(PowerSgdCompressor(f32.buckets, o, f32.ctx), RuntimeError);
}

}  // namespace
}  // namespace memtrain::comms
