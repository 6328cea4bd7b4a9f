// Issue 48, section 7: 1-bit gradients under AdamW did not hold within 3 % over three seeds and
// two batch splits (README, "Gradient compression"), so a run that asks for them is warned once
// (rank 0) and pointed to 1-bit Adam; 1-bit Adam itself gets no warning.
#include <gtest/gtest.h>

#include <string>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::Scratch;

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(OneBitWarning, OneBitGradientsUnderAdamWAreWarnedOnceAndOneBitAdamIsNot) {
  Scratch s;
  s.write("c.yaml", std::string(testing::kTinyMockYaml) + "compression:\n  method: onebit\n");
  const auto adamw = s.mpirun(2, "train --config c.yaml --run-dir a --set training.global_batch_size=4");
  EXPECT_EQ(adamw.exit_code, 0) << adamw.err;
  EXPECT_EQ(count(adamw.err, "memtrain: warning: compression.method: onebit feeds 1-bit gradients to adamw"), 1u)
      << adamw.err;
  EXPECT_TRUE(contains(adamw.err, "training.optimizer: onebit_adam is the 1-bit method to use"));
  s.write("d.yaml", testing::kTinyMockYaml);
  const auto onebit_adam = s.mpirun(
      2, "train --config d.yaml --run-dir b --set training.global_batch_size=4 --set training.optimizer=onebit_adam");
  EXPECT_EQ(onebit_adam.exit_code, 0) << onebit_adam.err;
  EXPECT_EQ(onebit_adam.err.find("warning: compression.method"), std::string::npos) << onebit_adam.err;
}

}  // namespace
}  // namespace memtrain::cli
