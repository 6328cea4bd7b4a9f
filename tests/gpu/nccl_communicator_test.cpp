// comms::NcclCommunicator against the group it replaces. One GPU makes a world of one rank, so
// each collective is checked against the single-rank group (what MPI gives a world of one)
// bit for bit, on device buffers; the shape of every call (offsets, counts, in-place moves) is
// exercised even where the sums are trivial. Several ranks need several GPUs (one per rank).
#include "comms/nccl_communicator.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <numeric>

#include "comms/single_rank_communicator.hpp"
#include "runtime/core/errors.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/kernels/test_util.hpp"

namespace memtrain::gpu_testing {
namespace {

class NcclCommunicatorTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    nccl = comms::NcclCommunicator::create(host, 0);
  }
  comms::SingleRankCommunicator host;
  std::unique_ptr<comms::NcclCommunicator> nccl;
};

TEST_F(NcclCommunicatorTest, AWorldOfOneIsTheSingleRankGroup) {
  EXPECT_EQ(nccl->rank(), 0);
  EXPECT_EQ(nccl->size(), 1);
  EXPECT_EQ(nccl->backend(), "nccl");
  const std::int64_t n = 100003;
  const auto x = kernels::testing::random_normal<float>(n, 71);

  // All-reduce sum and max, in place.
  for (bool max : {false, true}) {
    auto expected = x;
    if (max)
      host.allreduce_max(expected.data(), n);
    else
      host.allreduce_sum(expected.data(), n);
    DeviceBuffer<float> d(x);
    if (max)
      nccl->allreduce_max(d.get(), n);
    else
      nccl->allreduce_sum(d.get(), n);
    EXPECT_EQ(d.download(), expected) << (max ? "max" : "sum");
  }
  std::vector<std::int64_t> counts{5, -1};
  std::vector<std::int64_t> ints(17);
  std::iota(ints.begin(), ints.end(), -8);
  DeviceBuffer<std::int64_t> di(ints);
  nccl->allreduce_sum(di.get(), 17);
  EXPECT_EQ(di.download(), ints);

  // All-gather (f32 and raw 16-bit words), reduce-scatter, all-to-all.
  DeviceBuffer<float> send(x), recv(n);
  recv.poison();
  nccl->allgather(send.get(), recv.get(), n);
  EXPECT_EQ(recv.download(), x);
  recv.poison();
  nccl->reduce_scatter_sum(send.get(), recv.get(), n);
  EXPECT_EQ(recv.download(), x);
  recv.poison();
  nccl->alltoall(send.get(), recv.get(), n);
  EXPECT_EQ(recv.download(), x);
  std::vector<std::uint16_t> words(999);
  std::iota(words.begin(), words.end(), std::uint16_t{40000});
  DeviceBuffer<std::uint16_t> wsend(words), wrecv(words.size());
  wrecv.poison();
  nccl->allgather(wsend.get(), wrecv.get(), 999);
  EXPECT_EQ(wrecv.download(), words);

  // ZeRO-1's in-place, variable-count forms; then broadcast, barrier, split.
  DeviceBuffer<float> inplace(x);
  nccl->reduce_scatter_sum_in_place(inplace.get(), {n});
  nccl->allgather_in_place(inplace.get(), {n});
  EXPECT_EQ(inplace.download(), x);
  EXPECT_THROW(nccl->allgather_in_place(inplace.get(), counts), RuntimeError);
  nccl->broadcast(inplace.get(), n * 4, 0);
  EXPECT_EQ(inplace.download(), x);
  nccl->barrier();
  auto sub = nccl->split(0, 0);
  EXPECT_EQ(sub->size(), 1);
  EXPECT_EQ(sub->backend(), "nccl");
  EXPECT_THROW(nccl->split(-1, 0), RuntimeError);
}

}  // namespace
}  // namespace memtrain::gpu_testing
