// memory.recompute: auto as the trainer and `plan` use it: resolved before the model is built,
// the choice logged, and a budget nothing fits refused as a config error (exit 2).
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::kTinyMockYaml;
using testing::Scratch;

TEST(RecomputeAutoCli, TrainLogsItsChoiceForAHugeBudget) {
  Scratch s;
  s.write("exp.yaml", kTinyMockYaml);
  const auto r = s.memtrain(
      "train --config exp.yaml --run-dir run --dry-run --target 1GiB --set memory.recompute=auto "
      "--set memory.budget=1TiB");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "memtrain: memory.recompute auto: none (dry-run peak"));
}

TEST(RecomputeAutoCli, BudgetNothingFitsIsExitTwoBeforeTheRunDirectory) {
  Scratch s;
  s.write("exp.yaml", kTinyMockYaml);
  const auto r =
      s.memtrain("train --config exp.yaml --run-dir run --set memory.recompute=auto --set memory.budget=1KiB");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "--set memory.budget=1KiB: memory.budget = 1.00 KiB: no recompute setting fits"));
  EXPECT_FALSE(std::ifstream(s.path("run/config.yaml")).good());
}

// With --json the choice goes to stderr, so stdout stays one JSON document, and the plan shows
// the resolved setting rather than "auto".
TEST(RecomputeAutoCli, PlanReportsTheResolvedSetting) {
  Scratch s;
  s.write("exp.yaml", kTinyMockYaml);
  const auto r =
      s.memtrain("plan --config exp.yaml --target 1GiB --json --set memory.recompute=auto --set memory.budget=1TiB");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["recompute"], "none");
  EXPECT_TRUE(contains(r.err, "memory.recompute auto: none"));
}

}  // namespace
}  // namespace memtrain::cli
