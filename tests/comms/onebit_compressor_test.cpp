// OneBitCompressor and its packing in one process. References: the packing's definition (bit j
// of the sign of x_j, the sign of 0 being +1), the closed form of one rank's two compressions,
// and error feedback's telescoping identity: over any number of steps, the sum of what was
// applied plus the errors left equals the sum of the true values.
#include "comms/onebit_compressor.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "comms/single_rank_communicator.hpp"
#include "runtime/core/errors.hpp"
#include "tests/core/test_allocator.hpp"

namespace memtrain::comms {
namespace {

using memtrain::testing::TestAllocator;

std::vector<float> random_values(std::int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = normal(gen);
  return v;
}

// Any length, zeros of both signs, values of every magnitude: unpacking gives scale x the sign,
// and the words past the end stay 0.
TEST(OneBitPacking, PackThenUnpackGivesTheSigns) {
  for (std::int64_t n : {1, 15, 16, 17, 100}) {
    auto x = random_values(n, static_cast<unsigned>(n));
    x[0] = -0.0f;
    if (n > 1) x[1] = 0.0f;
    if (n > 2) x[2] = -1e30f;
    std::vector<std::uint16_t> words(static_cast<std::size_t>(packed_words(n)) + 1, 0xFFFF);
    words.back() = 0x1234;  // a guard word
    pack_signs(x.data(), n, words.data());
    EXPECT_EQ(words.back(), 0x1234);
    EXPECT_EQ(static_cast<std::int64_t>(words.size()) - 1, (n + 15) / 16);
    std::vector<float> out(static_cast<std::size_t>(n));
    unpack_signs(words.data(), n, 0.5f, out.data());
    for (std::int64_t j = 0; j < n; ++j) {
      EXPECT_EQ(out[j], x[j] < 0.0f ? -0.5f : 0.5f) << "n " << n << " element " << j;
    }
    // Padding bits (beyond n in the last word) are 0.
    if (n % 16 != 0) {
      EXPECT_EQ(words[static_cast<std::size_t>(n / 16)] >> (n % 16), 0) << n;
    }
  }
}

// bf16 as torch.tensor(s).bfloat16() rounds: to nearest, ties to even (s positive, finite).
double to_bf16(double s) {
  int e = 0;
  std::frexp(s, &e);                          // s = f 2^e, f in [0.5, 1)
  const double ulp = std::ldexp(1.0, e - 8);  // 8 significant bits
  return std::nearbyint(s / ulp) * ulp;       // default rounding mode: ties to even
}

// The scale a block's 4-bit code stands for, by Note [1-bit sums in two stages]'s formula:
// S = bf16(largest block scale), k = round(2 log2(S / s)) within [0, 15], S 2^(-k/2), 0 for 15.
float coded(double S, double s) {
  if (s == 0) return 0.0f;
  const long k = std::clamp<long>(std::lround(2 * std::log2(S / s)), 0, 15);
  if (k == 15) return 0.0f;
  return static_cast<float>(S) * static_cast<float>(std::exp2(-0.5 * static_cast<double>(k)));
}

// One rank: x = g + e is sent as s sign(x) with s its block's coded scale, the server
// compresses that again (z = s sign(x) + e_server has |z| = s everywhere in the block at the
// first step, so its scales code to s again and the result is s sign(x) exactly), and the
// worker error is x - s sign(x). Blocks: the spec's one rms scale per chunk (block_size 0: S
// alone), and the mean magnitude per 16 elements (the last block of 5).
TEST(OneBitCompressor, OneRankFirstStepIsTheBlockScaleTimesTheSigns) {
  struct Case {
    OneBitOptions options;
    int block;  // elements per scale among the 21
  };
  for (const Case& k : {Case{{0, OneBitScale::rms}, 32}, Case{{16, OneBitScale::mean_abs}, 16}}) {
    auto alloc = std::make_shared<TestAllocator>();
    core::Context ctx(alloc);
    auto buckets = make_gradient_buckets(ctx, {{1, "w", {7, 3}}}, core::DType::f32, std::int64_t{1} << 30);
    OneBitCompressor c(buckets, 1, ctx, k.options);
    const auto g0 = random_values(21, 3);
    float* g = buckets[0].buffer.data<float>();
    std::memcpy(g, g0.data(), 21 * 4);
    SingleRankCommunicator one;
    GradientSyncStats stats;
    c.sum(0, g, one, 0, stats);
    std::vector<float> scales;
    for (int lo = 0; lo < 21; lo += k.block) {
      const int hi = std::min(21, lo + k.block);
      double sum = 0;
      for (int j = lo; j < hi; ++j) {
        sum += k.options.scale == OneBitScale::rms ? double{g0[j]} * g0[j] : std::fabs(double{g0[j]});
      }
      scales.push_back(
          static_cast<float>(k.options.scale == OneBitScale::rms ? std::sqrt(sum / (hi - lo)) : sum / (hi - lo)));
    }
    const double S = to_bf16(*std::max_element(scales.begin(), scales.end()));
    for (int lo = 0; lo < 21; lo += k.block) {
      const int hi = std::min(21, lo + k.block);
      const double s = scales.size() == 1 ? S : coded(S, scales[static_cast<std::size_t>(lo / k.block)]);
      for (int j = lo; j < hi; ++j) {
        const double sign = g0[j] < 0 ? -1.0 : 1.0;
        EXPECT_EQ(g[j], static_cast<float>(s * sign)) << j;
        EXPECT_NEAR(c.worker_error(0).data<float>()[j], g0[j] - s * sign, 1e-6 * s) << j;
      }
    }
    // Padded to 32 elements: 2 words of signs and S, and with 2 blocks a word of codes, in each
    // stage.
    const int scale_words = k.block == 32 ? 1 : 2;
    EXPECT_EQ(c.alltoall_bytes(0), 32 / 8 + 2 * scale_words);
    EXPECT_EQ(stats.bytes, 2 * (32 / 8 + 2 * scale_words));
  }
}

// Error feedback: sum over steps of g equals sum of what was applied plus the worker and server
// errors (each step's x - sent is kept), so the lost part stays bounded while the sums grow.
TEST(OneBitCompressor, ErrorFeedbackKeepsTheLostPartOfTheSumBounded) {
  auto alloc = std::make_shared<TestAllocator>();
  core::Context ctx(alloc);
  const std::int64_t n = 300;
  auto buckets = make_gradient_buckets(ctx, {{1, "w", {n}}}, core::DType::f32, std::int64_t{1} << 30);
  OneBitCompressor c(buckets, 1, ctx);
  SingleRankCommunicator one;
  std::vector<double> truth(n, 0.0), applied(n, 0.0);
  float* g = buckets[0].buffer.data<float>();
  double worst = 0, truth_norm = 0;
  for (int step = 0; step < 100; ++step) {
    const auto v = random_values(n, 100 + static_cast<unsigned>(step));
    std::memcpy(g, v.data(), n * 4);
    GradientSyncStats stats;
    c.sum(0, g, one, step, stats);
    double lost = 0;
    truth_norm = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      truth[j] += v[j];
      applied[j] += g[j];
      const double residual = c.worker_error(0).data<float>()[j] + c.server_error(0).data<float>()[j];
      EXPECT_NEAR(truth[j] - applied[j], residual, 1e-5) << "step " << step << " element " << j;
      lost += (truth[j] - applied[j]) * (truth[j] - applied[j]);
      truth_norm += truth[j] * truth[j];
    }
    worst = std::max(worst, std::sqrt(lost));
  }
  // The true sum's norm grows like sqrt(steps); the lost part does not: after 100 steps it is
  // a few single steps' worth (one step's norm is about 1e-3 sqrt(n) = 0.017).
  EXPECT_LT(worst, 0.25 * std::sqrt(truth_norm));
  EXPECT_LT(worst, 10 * 1e-3 * std::sqrt(static_cast<double>(n)));
}

TEST(OneBitCompressor, BadWorldsAndBlockSizesAreErrors) {
  auto alloc = std::make_shared<TestAllocator>();
  core::Context ctx(alloc);
  auto f32 = make_gradient_buckets(ctx, {{1, "w", {4}}}, core::DType::f32, std::int64_t{1} << 30);
  EXPECT_THROW(OneBitCompressor(f32, 0, ctx), RuntimeError);
  EXPECT_THROW(OneBitCompressor(f32, 1, ctx, {8, OneBitScale::mean_abs}), RuntimeError);
  EXPECT_THROW(OneBitCompressor(f32, 1, ctx, {-16, OneBitScale::mean_abs}), RuntimeError);
  OneBitCompressor two(f32, 2, ctx);
  SingleRankCommunicator one;
  GradientSyncStats stats;
  EXPECT_THROW(two.sum(0, f32[0].buffer.data<float>(), one, 0, stats), RuntimeError);
}

}  // namespace
}  // namespace memtrain::comms
