// Runs under mpirun with 2 and 4 ranks (comms_mpi_2ranks, comms_mpi_4ranks): the two-stage 1-bit
// sum over real MPI against a reference computed in this one process from every rank's inputs
// (each rank's values are a pure function of the rank), following the formulas of Note [1-bit
// sums in two stages] element by element, without packing or collectives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comms/communicator.hpp"
#include "comms/mpi_communicator.hpp"
#include "comms/onebit_compressor.hpp"
#include "kernels/cpu/half_convert.hpp"
#include "memory/caching_allocator.hpp"
#include "memory/host_resource.hpp"
#include "runtime/core/context.hpp"

namespace memtrain::comms {
namespace {

std::vector<float> values(int r, std::int64_t step, std::int64_t n) {
  std::mt19937 gen(static_cast<unsigned>(7919 * r + step));
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  std::vector<float> g(static_cast<std::size_t>(n));
  for (auto& x : g) x = normal(gen);
  if (n > 3) g[3] = 0.0f;  // the sign of 0 is +1
  return g;
}

float sgn(float x) { return x < 0.0f ? -1.0f : 1.0f; }

// The scale of x[begin, begin + count).
float scale(const std::vector<float>& x, std::int64_t begin, std::int64_t count, OneBitScale kind) {
  if (count == 0) return 0.0f;
  double s = 0;
  for (std::int64_t j = 0; j < count; ++j) {
    s += kind == OneBitScale::rms ? double{x[begin + j]} * x[begin + j] : std::fabs(double{x[begin + j]});
  }
  return static_cast<float>(kind == OneBitScale::rms ? std::sqrt(s / static_cast<double>(count))
                                                     : s / static_cast<double>(count));
}

float bf16(float v) { return kernels::bf16_to_float(kernels::float_to_bf16(v)); }

// The scales a chunk's blocks travel as: S = bf16(largest), then each block's 4-bit code's
// value S 2^(-k/2), k = round(2 log2(S / s)) within [0, 15], 0 for 15; S alone for
// one block.
std::vector<float> coded(const std::vector<float>& s) {
  const float S = bf16(*std::max_element(s.begin(), s.end()));
  if (s.size() == 1) return {S};
  std::vector<float> out;
  for (float v : s) {
    if (v == 0.0f || S == 0.0f) {
      out.push_back(0.0f);
      continue;
    }
    const long k = std::clamp<long>(std::lround(2 * std::log2(double{S} / double{v})), 0, 15);
    out.push_back(k == 15 ? 0.0f : S * static_cast<float>(std::exp2(-0.5 * static_cast<double>(k))));
  }
  return out;
}

// One entry of n elements over P ranks: every rank's worker error, the servers' errors, and the
// sum every rank receives, by the Note's formulas.
struct Reference {
  Reference(std::int64_t n, int P, OneBitOptions o) : n(n), P(P), options(o) {
    const std::int64_t mult = 16 * P;
    k = (n + mult - 1) / mult * mult / P;
    block = o.block_size > 0 ? std::min(o.block_size, k) : k;
    e.assign(static_cast<std::size_t>(P), std::vector<float>(static_cast<std::size_t>(n), 0.0f));
    es.assign(static_cast<std::size_t>(k * P), 0.0f);  // chunk c's server error at c k + j
  }
  std::int64_t count(std::int64_t c) const { return std::clamp<std::int64_t>(n - c * k, 0, k); }
  // g[r]: rank r's values; returns the sum.
  std::vector<float> step(const std::vector<std::vector<float>>& g) {
    std::vector<std::vector<float>> x(static_cast<std::size_t>(P));
    for (int r = 0; r < P; ++r) {
      x[r].resize(static_cast<std::size_t>(n));
      for (std::int64_t j = 0; j < n; ++j) x[r][j] = g[r][j] + e[r][j];
    }
    std::vector<float> out(static_cast<std::size_t>(n));
    const std::int64_t blocks = (k + block - 1) / block;
    // The scales of chunk c of v (offset `at` in v), coded.
    auto chunk_scales = [&](const std::vector<float>& v, std::int64_t at, std::int64_t c) {
      std::vector<float> s;
      for (std::int64_t lo = 0; lo < blocks * block; lo += block) {
        s.push_back(scale(v, at + lo, std::clamp<std::int64_t>(count(c) - lo, 0, block), options.scale));
      }
      return coded(s);
    };
    for (std::int64_t c = 0; c < P; ++c) {
      std::vector<std::vector<float>> s;  // [P][blocks]
      for (int r = 0; r < P; ++r) s.push_back(chunk_scales(x[r], c * k, c));
      std::vector<float> z(static_cast<std::size_t>(count(c)));
      for (std::int64_t j = 0; j < count(c); ++j) {
        z[j] = es[c * k + j];
        for (int r = 0; r < P; ++r) z[j] += s[r][j / block] * sgn(x[r][c * k + j]);
      }
      const auto ss = chunk_scales(z, 0, c);
      for (std::int64_t j = 0; j < count(c); ++j) {
        const std::int64_t at = c * k + j;
        out[at] = ss[j / block] * sgn(z[j]);
        es[at] = z[j] - ss[j / block] * sgn(z[j]);
        for (int r = 0; r < P; ++r) e[r][at] = x[r][at] - s[r][j / block] * sgn(x[r][at]);
      }
    }
    return out;
  }
  // Bytes of both stages: signs, S and (with several blocks) 4-bit codes of every chunk, then
  // of the owned one.
  std::int64_t bytes() const {
    const std::int64_t blocks = (k + block - 1) / block;
    const std::int64_t scale_bytes = 2 + (blocks > 1 ? 2 * ((blocks + 3) / 4) : 0);
    return P * (k / 8 + scale_bytes) + (k / 8 + scale_bytes);
  }
  std::int64_t n, k = 0, block = 0;
  int P;
  OneBitOptions options;
  std::vector<std::vector<float>> e;
  std::vector<float> es;
};

std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Entries of 1, 40 and 1000 elements (padded to 16 x world), three steps so that both errors
// feed back: every rank's sum, worker error and server error equal the reference's bits, with
// one rms scale per chunk (the spec's form), and mean magnitudes per 16 and per 256 elements.
TEST(OneBit, TwoStageSumEqualsTheOneProcessReferenceBitForBit) {
  for (const OneBitOptions options : {OneBitOptions{0, OneBitScale::rms}, OneBitOptions{16, OneBitScale::mean_abs},
                                      OneBitOptions{256, OneBitScale::mean_abs}}) {
    SCOPED_TRACE("block_size " + std::to_string(options.block_size));
    auto world = make_world_communicator();
    const int P = world->size(), me = world->rank();
    core::Context ctx(std::make_shared<memory::CachingAllocator>(std::make_shared<memory::HostResource>()));
    const std::vector<std::int64_t> sizes = {1, 40, 1000};
    auto buckets = make_gradient_buckets(ctx, {{1, "a", {1}}, {2, "b", {8, 5}}, {3, "c", {1000}}}, core::DType::f32,
                                         std::int64_t{1} << 30);
    ASSERT_EQ(buckets.size(), 1u);
    OneBitCompressor c(buckets, P, ctx, options);
    std::vector<Reference> refs;
    for (auto n : sizes) refs.emplace_back(n, P, options);
    float* g = buckets[0].buffer.data<float>();
    const auto& entries = buckets[0].entries;
    for (std::int64_t step = 0; step < 3; ++step) {
      std::vector<float> mine;
      for (std::size_t t = 0; t < entries.size(); ++t) {
        std::vector<std::vector<float>> all;
        for (int r = 0; r < P; ++r) all.push_back(values(r, 10 * step + static_cast<std::int64_t>(t), sizes[t]));
        std::memcpy(g + entries[t].offset, all[me].data(), 4 * all[me].size());
      }
      GradientSyncStats stats;
      c.sum(0, g, *world, step, stats);
      for (std::size_t t = 0; t < entries.size(); ++t) {
        std::vector<std::vector<float>> all;
        for (int r = 0; r < P; ++r) all.push_back(values(r, 10 * step + static_cast<std::int64_t>(t), sizes[t]));
        const auto want = refs[t].step(all);
        const float* we = c.worker_error(0).data<float>() + entries[t].offset;
        for (std::int64_t j = 0; j < sizes[t]; ++j) {
          ASSERT_EQ(bits(g[entries[t].offset + j]), bits(want[j]))
              << "step " << step << " entry " << t << " element " << j;
          ASSERT_EQ(bits(we[j]), bits(refs[t].e[me][j]))
              << "worker error, step " << step << " entry " << t << " element " << j;
        }
      }
      // The server error of this rank's chunks.
      std::int64_t at = 0;
      for (std::size_t t = 0; t < entries.size(); ++t) {
        const float* es = c.server_error(0).data<float>() + at;
        for (std::int64_t j = 0; j < refs[t].count(me); ++j) {
          ASSERT_EQ(bits(es[j]), bits(refs[t].es[me * refs[t].k + j]))
              << "server error, entry " << t << " element " << j;
        }
        at += refs[t].k;
      }
      // Bytes: the all-to-all of padded / 8 plus a scale per block, the all-gather of the
      // padded / (8 P) bytes this rank owns plus its blocks' scales.
      std::int64_t want_bytes = 0;
      for (const auto& ref : refs) want_bytes += ref.bytes();
      EXPECT_EQ(stats.bytes, want_bytes);
      EXPECT_EQ(stats.bytes, c.alltoall_bytes(0) + c.allgather_bytes(0));
      EXPECT_EQ(stats.calls, 2);
    }
  }
}

// A non-finite value on the last rank: every rank gets the plain (non-finite) sum, and neither
// the worker nor the server errors move.
TEST(OneBit, ANonFiniteValueOnOneRankLeavesEveryErrorUntouched) {
  auto world = make_world_communicator();
  const int P = world->size(), me = world->rank();
  core::Context ctx(std::make_shared<memory::CachingAllocator>(std::make_shared<memory::HostResource>()));
  auto buckets = make_gradient_buckets(ctx, {{1, "w", {100}}}, core::DType::f32, std::int64_t{1} << 30);
  OneBitCompressor c(buckets, P, ctx);
  float* g = buckets[0].buffer.data<float>();
  auto v = values(me, 0, 100);
  std::memcpy(g, v.data(), 400);
  GradientSyncStats s0;
  c.sum(0, g, *world, 0, s0);
  const std::vector<float> we(c.worker_error(0).data<float>(), c.worker_error(0).data<float>() + 100);
  const std::int64_t ns = c.server_error(0).numel();
  const std::vector<float> es(c.server_error(0).data<float>(), c.server_error(0).data<float>() + ns);
  v = values(me, 1, 100);
  if (me == P - 1) v[50] = std::numeric_limits<float>::infinity();
  std::memcpy(g, v.data(), 400);
  GradientSyncStats s1;
  c.sum(0, g, *world, 1, s1);
  EXPECT_TRUE(std::isinf(g[50]));
  double want0 = 0;
  for (int r = 0; r < P; ++r) want0 += values(r, 1, 100)[0];
  EXPECT_NEAR(g[0], want0, 1e-6);  // the plain sum
  for (int j = 0; j < 100; ++j) ASSERT_EQ(bits(c.worker_error(0).data<float>()[j]), bits(we[j])) << j;
  for (std::int64_t j = 0; j < ns; ++j) ASSERT_EQ(bits(c.server_error(0).data<float>()[j]), bits(es[j])) << j;
  EXPECT_EQ(s1.bytes, c.alltoall_bytes(0) + c.allgather_bytes(0) + 400);
}

}  // namespace
}  // namespace memtrain::comms
