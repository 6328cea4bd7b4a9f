// Issue 12's convergence check on 4 ranks (2 ranks: tests/cli/convergence/compression_convergence_test.cpp),
// in the slow suite: ten runs of 1,500 steps, 4 ranks on however many cores.
#include <gtest/gtest.h>

#include "tests/cli/convergence/convergence_run.hpp"

namespace memtrain::cli {
namespace {

TEST(CompressionConvergence4Ranks, GradientCompressorsEndWithinThreePercentOfUncompressedTraining) {
  expect_gradient_compressors_converge(4);
}

TEST(CompressionConvergence4Ranks, OneBitAdamEndsWithinThreePercentOfAdamW) { expect_onebit_adam_converges(4); }

}  // namespace
}  // namespace memtrain::cli
