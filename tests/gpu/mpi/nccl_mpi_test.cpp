// NcclCommunicator against MpiCommunicator with several ranks, one GPU each (issue 14). Runs
// under mpirun with 2 ranks (CTest gpu_mpi_2ranks); every rank skips, with the reason, unless
// each rank of the node has a GPU of its own. Inputs are whole numbers, so every order of
// summation gives the same float and the two libraries must agree bit for bit.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <numeric>
#include <vector>

#include "comms/communicator.hpp"
#include "comms/nccl_communicator.hpp"
#include "memory/cuda_resource.hpp"

namespace memtrain::comms {
namespace {

// Rank r's element i: a whole number, distinct across ranks.
float input(int r, std::int64_t i) { return static_cast<float>((r + 1) * 1000 + i % 991); }

template <class T>
struct Device {
  explicit Device(const std::vector<T>& host) : n(host.size()) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
    ptr = static_cast<T*>(p);
    EXPECT_EQ(cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~Device() { cudaFree(ptr); }
  std::vector<T> host() const {
    std::vector<T> out(n);
    EXPECT_EQ(cudaMemcpy(out.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  T* ptr = nullptr;
  std::size_t n;
};

TEST(NcclAgainstMpi, EveryCollectiveGivesMpisResult) {
  auto world = make_world_communicator();
  // The ranks decide together: one GPU per rank of this node, or all skip.
  double fewest = -static_cast<double>(memory::cuda_device_count());
  world->allreduce_max(&fewest, 1);
  if (-fewest < world->local_size()) {
    GTEST_SKIP() << "NCCL needs one GPU per rank: " << -fewest << " visible for " << world->local_size()
                 << " ranks on a node" << (fewest == 0 ? " (" + memory::cuda_unavailable_reason() + ")" : "");
  }
  auto nccl = NcclCommunicator::create(*world, world->local_rank());
  const int P = world->size(), r = world->rank();
  ASSERT_EQ(nccl->size(), P);
  ASSERT_EQ(nccl->rank(), r);
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{7}, std::int64_t{70001}}) {
    std::vector<float> x(n);
    for (std::int64_t i = 0; i < n; ++i) x[i] = input(r, i);
    {  // all-reduce
      auto expected = x;
      world->allreduce_sum(expected.data(), n);
      Device<float> d(x);
      nccl->allreduce_sum(d.ptr, n);
      EXPECT_EQ(d.host(), expected) << "allreduce_sum n=" << n;
    }
    {  // all-gather, reduce-scatter, all-to-all
      std::vector<float> big(static_cast<std::size_t>(n) * P), expected(static_cast<std::size_t>(n) * P);
      for (std::size_t i = 0; i < big.size(); ++i) big[i] = input(r, static_cast<std::int64_t>(i));
      world->allgather(x.data(), expected.data(), n);
      Device<float> send(x), recv{std::vector<float>(big.size())};
      nccl->allgather(send.ptr, recv.ptr, n);
      EXPECT_EQ(recv.host(), expected) << "allgather n=" << n;
      std::vector<float> rs(n);
      world->reduce_scatter_sum(big.data(), rs.data(), n);
      Device<float> bsend(big), brecv{std::vector<float>(n)};
      nccl->reduce_scatter_sum(bsend.ptr, brecv.ptr, n);
      EXPECT_EQ(brecv.host(), rs) << "reduce_scatter_sum n=" << n;
      world->alltoall(big.data(), expected.data(), n);
      Device<float> a2a{std::vector<float>(big.size())};
      nccl->alltoall(bsend.ptr, a2a.ptr, n);
      EXPECT_EQ(a2a.host(), expected) << "alltoall n=" << n;
    }
    {  // ZeRO-1's uneven in-place forms: block j holds n + j elements
      std::vector<std::int64_t> counts(P);
      std::iota(counts.begin(), counts.end(), n);
      const std::int64_t total = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
      std::vector<float> data(total);
      for (std::int64_t i = 0; i < total; ++i) data[i] = input(r, i);
      auto mpi = data;
      world->reduce_scatter_sum_in_place(mpi.data(), counts);
      Device<float> d(data);
      nccl->reduce_scatter_sum_in_place(d.ptr, counts);
      const auto got = d.host();
      EXPECT_TRUE(std::equal(mpi.begin(), mpi.begin() + counts[r], got.begin())) << "reduce_scatter_in_place n=" << n;
      world->allgather_in_place(mpi.data(), counts);
      // Rebuild NCCL's input as MPI's: this rank's reduced block at its offset.
      std::vector<float> placed(total, 0.0f);
      const std::int64_t offset = std::accumulate(counts.begin(), counts.begin() + r, std::int64_t{0});
      std::copy(got.begin(), got.begin() + counts[r], placed.begin() + offset);
      Device<float> p(placed);
      nccl->allgather_in_place(p.ptr, counts);
      EXPECT_EQ(p.host(), mpi) << "allgather_in_place n=" << n;
    }
  }
  // Broadcast from the last rank, and a split into even and odd ranks.
  std::vector<float> b(5, static_cast<float>(r));
  Device<float> db(b);
  nccl->broadcast(db.ptr, 5 * sizeof(float), P - 1);
  EXPECT_EQ(db.host(), std::vector<float>(5, static_cast<float>(P - 1)));
  auto half = nccl->split(r % 2, r);
  auto mpi_half = world->split(r % 2, r);
  EXPECT_EQ(half->size(), mpi_half->size());
  EXPECT_EQ(half->rank(), mpi_half->rank());
  nccl->barrier();
}

}  // namespace
}  // namespace memtrain::comms
