// Issue 12's convergence check on 2 ranks (4 ranks: tests/cli/convergence/slow/): every compression method
// ends within 3 % of uncompressed training's eval_loss after the same 1,500 steps of
// configs/main.yaml, with at least 10x fewer bytes at the last step for PowerSGD rank 4 and 20x
// for 1-bit (both stages counted). Measured values are in the README's performance section.
#include <gtest/gtest.h>

#include "tests/cli/convergence/convergence_run.hpp"

namespace memtrain::cli {
namespace {

TEST(CompressionConvergence, GradientCompressorsEndWithinThreePercentOfUncompressedTraining) {
  expect_gradient_compressors_converge(2);
}

TEST(CompressionConvergence, OneBitAdamEndsWithinThreePercentOfAdamW) { expect_onebit_adam_converges(2); }

}  // namespace
}  // namespace memtrain::cli
