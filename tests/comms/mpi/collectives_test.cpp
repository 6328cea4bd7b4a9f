// Runs under mpirun with 2 and 4 ranks (CTest: comms_mpi_2ranks, comms_mpi_4ranks). Each rank
// builds every rank's input itself (a pure function of the rank number), computes the expected
// result in this one process, and compares it with what the collective returned.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "comms/communicator.hpp"
#include "comms/mpi_communicator.hpp"
#include "comms/process_grid.hpp"

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
