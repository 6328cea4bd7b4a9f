#include "kernels/cpu/threads.hpp"

#include <gtest/gtest.h>
#include <omp.h>

#include <stdexcept>

extern "C" int openblas_get_num_threads(void);

namespace memtrain::kernels {
namespace {

// set_num_threads drives both OpenMP and OpenBLAS, so ranks sharing a node do not
// oversubscribe its cores.
TEST(SetNumThreads, SetsOpenMpAndOpenBlasThreadCounts) {
  const int saved = num_threads();
  set_num_threads(1);
  EXPECT_EQ(num_threads(), 1);
  EXPECT_EQ(omp_get_max_threads(), 1);
  EXPECT_EQ(openblas_get_num_threads(), 1);
  set_num_threads(2);
  EXPECT_EQ(num_threads(), 2);
  EXPECT_EQ(omp_get_max_threads(), 2);
  EXPECT_EQ(openblas_get_num_threads(), 2);
  set_num_threads(saved);
}

// Inside a SerialBlasScope OpenBLAS runs single-threaded; afterwards both counts are back.
TEST(SerialBlasScope, RestoresThreadCountsOnExit) {
  const int saved = num_threads();
  set_num_threads(2);
  {
    SerialBlasScope scope;
    EXPECT_EQ(openblas_get_num_threads(), 1);
  }
  EXPECT_EQ(openblas_get_num_threads(), 2);
  EXPECT_EQ(omp_get_max_threads(), 2);
  set_num_threads(saved);
}

// A kernel calling another nests scopes: the inner one must not restore OpenBLAS's threads
// while the outer loop still runs.
TEST(SerialBlasScope, NestedScopeLeavesOuterScopeSerial) {
  const int saved = num_threads();
  set_num_threads(2);
  {
    SerialBlasScope outer;
    { SerialBlasScope inner; }
    EXPECT_EQ(openblas_get_num_threads(), 1);
  }
  EXPECT_EQ(openblas_get_num_threads(), 2);
  set_num_threads(saved);
}

TEST(SetNumThreads, RejectsNonPositiveCount) {
  EXPECT_THROW(set_num_threads(0), std::invalid_argument);
  EXPECT_THROW(set_num_threads(-3), std::invalid_argument);
}

}  // namespace
}  // namespace memtrain::kernels
