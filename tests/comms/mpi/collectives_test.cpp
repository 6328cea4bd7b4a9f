// Runs under mpirun with 2 and 4 ranks (CTest: comms_mpi_2ranks, comms_mpi_4ranks). Each rank
// builds every rank's input itself (a pure function of the rank number), computes the expected
// result in this one process, and compares it with what the collective returned.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <cstdint>
#include <vector>

#include "comms/communicator.hpp"
#include "comms/mpi_communicator.hpp"
#include "comms/gradient_synchronizer.hpp"
#include "comms/process_grid.hpp"
#include "comms/shard_layout.hpp"
#include "memory/caching_allocator.hpp"
#include "memory/host_resource.hpp"
#include "runtime/core/context.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::comms {
namespace {

// Rank r's input element i: distinct across ranks and elements, exact in float.
float input(int r, std::int64_t i) { return static_cast<float>(r * 1000 + i % 997) - 0.25f * r; }

// Uneven sizes: one element, a prime, and a block longer than one MPI eager message.
const std::int64_t kSizes[] = {1, 7, 1001, 70001};

TEST(Collectives, ThreadLevelIsAtLeastSerialized) {
  auto c = make_world_communicator();
  EXPECT_GE(MpiCommunicator::thread_level(), MPI_THREAD_SERIALIZED);
}

TEST(Collectives, AllreduceMaxMatchesOneProcess) {
  auto c = make_world_communicator();
  const int P = c->size();
  for (std::int64_t n : kSizes) {
    std::vector<float> f(n);
    std::vector<double> d(n);
    for (std::int64_t i = 0; i < n; ++i) {
      // The maximum sits on a different rank for different i.
      f[i] = static_cast<float>((c->rank() + i) % P) * 0.5f - 3.0f;
      d[i] = -f[i];
    }
    c->allreduce_max(f.data(), n);
    c->allreduce_max(d.data(), n);
    for (std::int64_t i = 0; i < n; ++i) {
      float fmax = -1e30f;
      double dmax = -1e300;
      for (int r = 0; r < P; ++r) {
        const float v = static_cast<float>((r + i) % P) * 0.5f - 3.0f;
        fmax = std::max(fmax, v);
        dmax = std::max(dmax, -static_cast<double>(v));
      }
      ASSERT_EQ(f[i], fmax) << "n " << n << " i " << i;
      ASSERT_EQ(d[i], dmax) << "n " << n << " i " << i;
    }
  }
}

TEST(Collectives, AllgatherMatchesOneProcess) {
  auto c = make_world_communicator();
  const int P = c->size();
  for (std::int64_t n : kSizes) {
    std::vector<float> send(n), recv(P * n, -1.0f);
    std::vector<std::uint16_t> send16(n), recv16(P * n, 0);
    for (std::int64_t i = 0; i < n; ++i) {
      send[i] = input(c->rank(), i);
      send16[i] = static_cast<std::uint16_t>(c->rank() * 4099 + i);
    }
    c->allgather(send.data(), recv.data(), n);
    c->allgather(send16.data(), recv16.data(), n);
    for (int r = 0; r < P; ++r) {
      for (std::int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(recv[r * n + i], input(r, i)) << "n " << n << " block " << r;
        ASSERT_EQ(recv16[r * n + i], static_cast<std::uint16_t>(r * 4099 + i));
      }
    }
  }
}

TEST(Collectives, ReduceScatterMatchesOneProcess) {
  auto c = make_world_communicator();
  const int P = c->size();
  for (std::int64_t n : kSizes) {
    std::vector<float> send(P * n), recv(n, -1.0f);
    for (std::int64_t j = 0; j < P * n; ++j) send[j] = input(c->rank(), j);
    c->reduce_scatter_sum(send.data(), recv.data(), n);
    for (std::int64_t i = 0; i < n; ++i) {
      double expected = 0.0;
      for (int r = 0; r < P; ++r) expected += input(r, c->rank() * n + i);
      ASSERT_EQ(recv[i], static_cast<float>(expected)) << "n " << n << " i " << i;
    }
  }
}

// ZeRO-1's in-place, uneven collectives: blocks as shard_counts cuts n (the last ranks' blocks
// shorter or empty).
TEST(Collectives, InPlaceReduceScatterOfUnevenBlocksMatchesOneProcess) {
  auto c = make_world_communicator();
  const int P = c->size();
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{2}, std::int64_t{7}, std::int64_t{1001}, std::int64_t{70001}}) {
    const auto counts = shard_counts(n, P);
    const std::int64_t begin = shard_offset(counts, c->rank());
    std::vector<float> data(n);
    for (std::int64_t j = 0; j < n; ++j) data[j] = input(c->rank(), j);
    c->reduce_scatter_sum_in_place(data.data(), counts);
    for (std::int64_t i = 0; i < counts[c->rank()]; ++i) {
      double expected = 0.0;
      for (int r = 0; r < P; ++r) expected += input(r, begin + i);
      ASSERT_EQ(data[i], static_cast<float>(expected)) << "n " << n << " i " << i;
    }
  }
}

TEST(Collectives, InPlaceAllgatherOfUnevenBlocksMatchesOneProcess) {
  auto c = make_world_communicator();
  const int P = c->size();
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{7}, std::int64_t{70001}}) {
    const auto counts = shard_counts(n, P);
    std::vector<float> f(n, -1.0f);
    std::vector<std::uint16_t> h(n, 0xFFFF);
    const std::int64_t begin = shard_offset(counts, c->rank());
    for (std::int64_t i = begin; i < begin + counts[c->rank()]; ++i) {
      f[i] = input(c->rank(), i);
      h[i] = static_cast<std::uint16_t>(c->rank() * 7 + i % 11);
    }
    c->allgather_in_place(f.data(), counts);
    c->allgather_in_place(h.data(), counts);
    for (int r = 0; r < P; ++r) {
      const std::int64_t b = shard_offset(counts, r);
      for (std::int64_t i = b; i < b + counts[r]; ++i) {
        ASSERT_EQ(f[i], input(r, i)) << "n " << n << " i " << i;
        ASSERT_EQ(h[i], static_cast<std::uint16_t>(r * 7 + i % 11)) << "n " << n << " i " << i;
      }
    }
  }
  std::vector<float> d(4);
  EXPECT_THROW(c->allgather_in_place(d.data(), std::vector<std::int64_t>(P + 1, 1)), RuntimeError);
}

// The synchroniser in ZeRO-1's mode over MPI: each rank's block of each bucket is the sum of
// every rank's block, f32 in place and bf16 through the f32 strips (small integers, exact in
// bf16 and in their sums), with buckets whose sizes the ranks do not divide; then the shards
// all-gather back.
TEST(Collectives, ReduceScatterSynchronizerGivesEachRankTheSumOfItsBlocks) {
  auto c = make_world_communicator();
  const int P = c->size();
  for (core::DType dtype : {core::DType::f32, core::DType::bf16}) {
    core::Context ctx(std::make_shared<memory::CachingAllocator>(std::make_shared<memory::HostResource>()));
    const std::vector<GradientSpec> specs = {{0, "a", {5, 3}}, {1, "b", {7}}, {2, "c", {1}}, {3, "d", {1003}}};
    auto buckets = make_gradient_buckets(ctx, specs, dtype, 64);
    auto value = [](int r, std::int64_t i) { return static_cast<float>(r + i % 5); };
    for (auto& b : buckets) {
      for (std::int64_t i = 0; i < b.buffer.numel(); ++i) {
        const float x = value(c->rank(), i);
        if (dtype == core::DType::f32) {
          b.buffer.data<float>()[i] = x;
        } else {
          std::uint32_t bits;
          std::memcpy(&bits, &x, 4);
          b.buffer.data<std::uint16_t>()[i] = static_cast<std::uint16_t>(bits >> 16);  // exact
        }
      }
    }
    GradientSynchronizer sync(buckets, *c, ctx, true, GradientReduction::reduce_scatter);
    sync.begin_step();
    for (const auto& s : specs) sync.mark_ready(s.key);
    sync.finish();
    for (std::size_t b = 0; b < buckets.size(); ++b) {
      const auto counts = shard_counts(buckets[b].buffer.numel(), P);
      EXPECT_EQ(sync.shard_count(b), counts[c->rank()]);
      EXPECT_EQ(sync.shard_begin(b), shard_offset(counts, c->rank()));
      for (std::int64_t i = sync.shard_begin(b); i < sync.shard_begin(b) + sync.shard_count(b); ++i) {
        double expected = 0.0;
        for (int r = 0; r < P; ++r) expected += value(r, i);
        float got;
        if (dtype == core::DType::f32) {
          got = buckets[b].buffer.data<float>()[i];
        } else {
          const std::uint32_t bits = std::uint32_t{buckets[b].buffer.data<std::uint16_t>()[i]} << 16;
          std::memcpy(&got, &bits, 4);
        }
        ASSERT_EQ(got, static_cast<float>(expected)) << "bucket " << b << " element " << i;
      }
    }
    // Values back: each rank writes rank-tagged words into its blocks, all-gathers, and reads
    // every rank's.
    for (std::size_t b = 0; b < buckets.size(); ++b) {
      auto* words = dtype == core::DType::f32 ? reinterpret_cast<std::uint16_t*>(buckets[b].buffer.data<float>())
                                              : buckets[b].buffer.data<std::uint16_t>();
      for (std::int64_t i = sync.shard_begin(b); i < sync.shard_begin(b) + sync.shard_count(b); ++i) {
        words[i] = static_cast<std::uint16_t>(100 * c->rank() + i % 50);
      }
    }
    sync.all_gather_shards(core::DType::bf16);
    for (std::size_t b = 0; b < buckets.size(); ++b) {
      const auto counts = shard_counts(buckets[b].buffer.numel(), P);
      auto* words = dtype == core::DType::f32 ? reinterpret_cast<std::uint16_t*>(buckets[b].buffer.data<float>())
                                              : buckets[b].buffer.data<std::uint16_t>();
      for (int r = 0; r < P; ++r) {
        for (std::int64_t i = shard_offset(counts, r); i < shard_offset(counts, r) + counts[r]; ++i) {
          ASSERT_EQ(words[i], static_cast<std::uint16_t>(100 * r + i % 50)) << "bucket " << b;
        }
      }
    }
  }
}

TEST(Collectives, AlltoallMatchesOneProcess) {
  auto c = make_world_communicator();
  const int P = c->size();
  for (std::int64_t n : kSizes) {
    std::vector<float> send(P * n), recv(P * n, -1.0f);
    std::vector<std::uint16_t> send16(P * n), recv16(P * n, 0);
    for (std::int64_t j = 0; j < P * n; ++j) {
      send[j] = input(c->rank(), j);
      send16[j] = static_cast<std::uint16_t>(c->rank() * 7 + j);
    }
    c->alltoall(send.data(), recv.data(), n);
    c->alltoall(send16.data(), recv16.data(), n);
    // Block r of recv is block rank() of rank r's send.
    for (int r = 0; r < P; ++r) {
      for (std::int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(recv[r * n + i], input(r, c->rank() * n + i)) << "n " << n << " block " << r;
        ASSERT_EQ(recv16[r * n + i], static_cast<std::uint16_t>(r * 7 + c->rank() * n + i));
      }
    }
  }
}

TEST(Collectives, SplitMakesGroupsByColorOrderedByKey) {
  auto c = make_world_communicator();
  const int P = c->size(), rank = c->rank();
  // Two colors (even and odd ranks), ordered by descending world rank.
  auto sub = c->split(rank % 2, P - rank);
  const int members = (P + 1 - rank % 2) / 2;
  EXPECT_EQ(sub->size(), members);
  std::vector<std::int64_t> ranks(sub->size());
  const std::int64_t mine = rank;
  std::vector<float> mine_f(1, static_cast<float>(rank)), all(sub->size());
  sub->allgather(mine_f.data(), all.data(), 1);
  for (int i = 1; i < sub->size(); ++i) EXPECT_GT(all[i - 1], all[i]);  // descending key
  for (float r : all) EXPECT_EQ(static_cast<int>(r) % 2, rank % 2);
  std::int64_t sum = mine;
  sub->allreduce_sum(&sum, 1);
  std::int64_t expected = 0;
  for (int r = rank % 2; r < P; r += 2) expected += r;
  EXPECT_EQ(sum, expected);
  EXPECT_THROW(c->split(-1, 0), std::exception);
}

TEST(Collectives, ProcessGridPutsTensorParallelRanksSideBySide) {
  const int P = make_world_communicator()->size();
  for (int tp = 1; tp <= P; ++tp) {
    if (P % tp != 0) {
      EXPECT_THROW(ProcessGrid(make_world_communicator(), tp), std::exception) << tp;
      continue;
    }
    ProcessGrid grid(make_world_communicator(), tp);
    const int rank = grid.world().rank();
    EXPECT_EQ(grid.tp_size(), tp);
    EXPECT_EQ(grid.dp_size(), P / tp);
    EXPECT_EQ(rank, grid.dp_rank() * tp + grid.tp_rank());
    // Summing the world ranks over each group gives the members that rank order predicts.
    std::int64_t tp_sum = rank, dp_sum = rank;
    grid.tp().allreduce_sum(&tp_sum, 1);
    grid.dp().allreduce_sum(&dp_sum, 1);
    std::int64_t tp_expected = 0, dp_expected = 0;
    for (int t = 0; t < tp; ++t) tp_expected += grid.dp_rank() * tp + t;
    for (int d = 0; d < P / tp; ++d) dp_expected += d * tp + grid.tp_rank();
    EXPECT_EQ(tp_sum, tp_expected) << "tp " << tp;
    EXPECT_EQ(dp_sum, dp_expected) << "tp " << tp;
  }
}

}  // namespace
}  // namespace memtrain::comms
