// Runs under `mpirun -np 2` (CTest: comms_mpi_2ranks). Every rank checks the collectives
// against closed forms computed from the rank numbers.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "comms/communicator.hpp"

namespace memtrain::comms {

TEST(MpiCommunicator, LaunchedByMpirunGivesMpiBackend) {
  auto c = make_world_communicator();
  EXPECT_EQ(c->backend(), "mpi");
  EXPECT_GE(c->size(), 2);
  EXPECT_EQ(c->local_size(), c->size());  // one node
}

// sum over ranks r of (r + 1) * (i + 1) = (i + 1) * P (P + 1) / 2.
TEST(MpiCommunicator, AllreduceSumMatchesClosedForm) {
  auto c = make_world_communicator();
  const int P = c->size();
  const int n = 1000;
  std::vector<float> f(n);
  std::vector<double> d(n);
  std::vector<std::int64_t> k(n);
  for (int i = 0; i < n; ++i) {
    f[i] = static_cast<float>((c->rank() + 1) * (i + 1));
    d[i] = 0.5 * (c->rank() + 1) * (i + 1);
    k[i] = static_cast<std::int64_t>(c->rank() + 1) * (i + 1) * 1000000000LL;
  }
  c->allreduce_sum(f.data(), n);
  c->allreduce_sum(d.data(), n);
  c->allreduce_sum(k.data(), n);
  for (int i = 0; i < n; ++i) {
    const double expected = (i + 1.0) * P * (P + 1) / 2.0;
    EXPECT_EQ(f[i], static_cast<float>(expected)) << i;
    EXPECT_DOUBLE_EQ(d[i], 0.5 * expected) << i;
    EXPECT_EQ(k[i], static_cast<std::int64_t>(expected) * 1000000000LL) << i;
  }
}

TEST(MpiCommunicator, BroadcastCopiesRootBytes) {
  auto c = make_world_communicator();
  std::vector<int> v(17, c->rank() == 1 ? 42 : -1);
  c->broadcast(v.data(), static_cast<std::int64_t>(v.size() * sizeof(int)), /*root=*/1);
  for (int x : v) EXPECT_EQ(x, 42);
  c->barrier();
}

}  // namespace memtrain::comms
