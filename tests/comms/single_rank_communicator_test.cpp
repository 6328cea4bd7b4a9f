#include <gtest/gtest.h>

#include <cstdlib>

#include "comms/communicator.hpp"
#include "comms/single_rank_communicator.hpp"

namespace memtrain::comms {

// Outside mpirun the world is one rank and collectives leave data as it is (sum over one rank).
TEST(SingleRankCommunicator, CollectivesAreIdentity) {
  SingleRankCommunicator c;
  float f[3] = {1.5f, -2.0f, 3.25f};
  double d[2] = {1e300, -4.0};
  std::int64_t i[2] = {7, -9};
  c.allreduce_sum(f, 3);
  c.allreduce_sum(d, 2);
  c.allreduce_sum(i, 2);
  EXPECT_EQ(f[0], 1.5f);
  EXPECT_EQ(f[2], 3.25f);
  EXPECT_EQ(d[0], 1e300);
  EXPECT_EQ(i[1], -9);
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.size(), 1);
}

// A plain process (no launcher variables) gets the single-rank group and never initialises MPI.
TEST(WorldCommunicator, WithoutLauncherIsSingleRank) {
  if (launched_by_mpi()) GTEST_SKIP() << "running under an MPI launcher";
  auto c = make_world_communicator();
  EXPECT_EQ(c->backend(), "single");
  EXPECT_EQ(c->size(), 1);
}

}  // namespace memtrain::comms
