#include <gtest/gtest.h>

#include <vector>

#include "comms/counting_communicator.hpp"
#include "comms/process_grid.hpp"
#include "comms/simulated_world_communicator.hpp"
#include "comms/single_rank_communicator.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::comms {

// A group of one: each collective is exact (a gather of one block, a reduce-scatter of one).
TEST(SingleRankCommunicator, BlockCollectivesOfOneRankCopy) {
  SingleRankCommunicator c;
  const std::vector<float> send = {1.0f, -2.5f, 3.0f};
  std::vector<float> gathered(3), scattered(3), exchanged(3);
  c.allgather(send.data(), gathered.data(), 3);
  c.reduce_scatter_sum(send.data(), scattered.data(), 3);
  c.alltoall(send.data(), exchanged.data(), 3);
  EXPECT_EQ(gathered, send);
  EXPECT_EQ(scattered, send);
  EXPECT_EQ(exchanged, send);
  float m[2] = {4.0f, -1.0f};
  c.allreduce_max(m, 2);
  EXPECT_EQ(m[0], 4.0f);
  EXPECT_EQ(m[1], -1.0f);
  EXPECT_EQ(c.split(3, 0)->size(), 1);
}

// Bytes handed to each collective, by its definition: n elements of the send block (whole
// send buffer for reduce-scatter and all-to-all, size() blocks).
TEST(CountingCommunicator, CountsCallsAndBytesAndForwards) {
  SimulatedWorldCommunicator world(4);
  CountingCommunicator c(world);
  std::vector<float> f(10, 1.0f), big(40);
  std::vector<double> d(3);
  std::vector<std::uint16_t> h(5), hbig(20);
  c.allreduce_sum(f.data(), 10);                   // 40
  c.allreduce_max(d.data(), 3);                    // 24
  c.allgather(f.data(), big.data(), 10);           // 40
  c.allgather(h.data(), hbig.data(), 5);           // 10
  c.reduce_scatter_sum(big.data(), f.data(), 10);  // 160
  c.alltoall(big.data(), big.data(), 10);          // 160
  c.broadcast(d.data(), 24, 0);                    // 24
  EXPECT_EQ(c.counts().calls, 7);
  EXPECT_EQ(c.counts().bytes, 40 + 24 + 40 + 10 + 160 + 160 + 24);
  EXPECT_GE(c.counts().seconds, 0.0);
  EXPECT_EQ(big[39], 1.0f);  // the simulated gather repeated the block: the call went through
  EXPECT_EQ(c.size(), 4);
}

TEST(ProcessGrid, OneProcessIsAGridOfOne) {
  ProcessGrid grid(std::make_unique<SingleRankCommunicator>(), 1);
  EXPECT_EQ(grid.tp_size(), 1);
  EXPECT_EQ(grid.dp_size(), 1);
  EXPECT_EQ(grid.tp_rank(), 0);
  EXPECT_EQ(grid.dp_rank(), 0);
}

TEST(ProcessGrid, SimulatedGridHasTheGroupSizesOfARealOne) {
  auto grid = ProcessGrid::simulated(8, 2);
  EXPECT_EQ(grid.world().size(), 8);
  EXPECT_EQ(grid.tp_size(), 2);
  EXPECT_EQ(grid.dp_size(), 4);
  // A simulated gather repeats this rank's block: a dry run sees the shapes of a real one.
  const float send[2] = {1.0f, 2.0f};
  float recv[4] = {};
  grid.tp().allgather(send, recv, 2);
  EXPECT_EQ(recv[2], 1.0f);
  EXPECT_EQ(recv[3], 2.0f);
  EXPECT_THROW(grid.world().split(0, 0), RuntimeError);
}

TEST(ProcessGrid, RefusesATensorParallelSizeThatDoesNotDivideTheWorld) {
  EXPECT_THROW(ProcessGrid::simulated(6, 4), ConfigError);
  EXPECT_THROW(ProcessGrid::simulated(4, 0), ConfigError);
  EXPECT_THROW(ProcessGrid(std::make_unique<SingleRankCommunicator>(), 2), ConfigError);
  try {
    check_grid(6, 4);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.tensor_model_parallel_size = 4"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("6 ranks"), std::string::npos) << e.what();
  }
}

}  // namespace memtrain::comms
