// Runs under mpirun with 2 and 4 ranks (comms_mpi_2ranks, comms_mpi_4ranks): PowerSGD over
// real MPI. Each rank builds every rank's gradients (a pure function of the rank), so the
// reference, the plain sum, is computed in this one process.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "comms/communicator.hpp"
#include "comms/mpi_communicator.hpp"
#include "comms/powersgd_compressor.hpp"
#include "memory/caching_allocator.hpp"
#include "memory/host_resource.hpp"
#include "runtime/core/context.hpp"

namespace memtrain::comms {
namespace {

// Rank r's gradients at `step`: normal draws of gradient size from a generator seeded by (r,
// step), so that every rank can build every rank's (and the summed matrices are
// well-conditioned: PowerSGD's projection is as exact as the Gram-Schmidt of P, which loses
// eps x cond(P); Note [Gram-Schmidt twice, and an epsilon]).
std::vector<float> gradients(int r, std::int64_t step, std::int64_t n) {
  std::mt19937 gen(static_cast<unsigned>(1000 * r + step));
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  std::vector<float> g(static_cast<std::size_t>(n));
  for (auto& x : g) x = normal(gen);
  return g;
}

// With r = min(n, m) every rank gets the plain sum of all ranks' gradients, up to rounding,
// step after step (the errors stay at rounding level), and the same bits on every rank.
TEST(PowerSgd, FullRankGivesEveryRankTheSum) {
  auto world = make_world_communicator();
  const int P = world->size();
  core::Context ctx(std::make_shared<memory::CachingAllocator>(std::make_shared<memory::HostResource>()));
  auto buckets = make_gradient_buckets(ctx, {{1, "w", {12, 5}}, {2, "b", {7}}, {3, "v", {4, 9}}}, core::DType::f32,
                                       std::int64_t{1} << 30);
  PowerSgdOptions o;
  o.rank = 5;
  o.min_compression_rate = 1e-9;
  PowerSgdCompressor c(buckets, o, ctx);
  ASSERT_EQ(c.matrices(0).size(), 2u);
  float* g = buckets[0].buffer.data<float>();
  const std::int64_t n = buckets[0].buffer.numel();
  for (std::int64_t step = 0; step < 3; ++step) {
    std::vector<std::vector<float>> all;
    for (int r = 0; r < P; ++r) all.push_back(gradients(r, step, n));
    std::copy(all[world->rank()].begin(), all[world->rank()].end(), g);
    GradientSyncStats stats;
    c.sum(0, g, *world, step, stats);
    double diff = 0, ref = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      double want = 0;
      for (int r = 0; r < P; ++r) want += all[r][static_cast<std::size_t>(i)];
      diff += (g[i] - want) * (g[i] - want);
      ref += want * want;
    }
    EXPECT_LE(std::sqrt(diff), 1e-5 * std::sqrt(ref)) << "step " << step;
    // Every rank holds the same compressed sum: rank 0's bits, broadcast by a max and a min.
    std::vector<float> hi(g, g + n), lo(g, g + n);
    world->allreduce_max(hi.data(), n);
    for (auto& x : lo) x = -x;
    world->allreduce_max(lo.data(), n);
    for (std::int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(hi[static_cast<std::size_t>(i)], g[i]) << "ranks differ at element " << i;
      ASSERT_EQ(-lo[static_cast<std::size_t>(i)], g[i]) << "ranks differ at element " << i;
    }
  }
}

}  // namespace
}  // namespace memtrain::comms
