// The trainer with precision.dtype fp16/bf16 (issue 5): metrics.jsonl carries loss_scale and
// skipped_steps on every training line, and a run whose fp16 gradients keep overflowing at the
// minimum loss scale stops with the scaler's error (memtrain::RuntimeError, exit 1) after
// logging what it did, never training on.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/core/errors.hpp"
#include "runtime/train/trainer.hpp"
#include "tests/train/temp_dir.hpp"
#include "tests/train/tiny_config.hpp"

namespace memtrain::train {
namespace {

std::vector<nlohmann::json> training_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("tokens_per_s")) out.push_back(std::move(j));
  }
  return out;
}

Config short_run(const std::string& dtype) {
  Config c = testing::tiny_mock_config();
  c.precision.dtype = dtype;
  c.training.max_steps = 6;
  c.training.log_interval = 2;
  c.training.eval_interval = 6;
  c.training.eval_steps = 1;
  return c;
}

TEST(RunTrainingPrecision, Fp16LinesCarryTheLossScaleAndSkippedSteps) {
  testing::TempDir tmp;
  Config c = short_run("fp16");
  c.precision.loss_scale.initial_scale = 1024;
  ASSERT_EQ(run_training(c, RunOptions{tmp.sub("run")}), 0);
  const auto lines = training_lines(tmp.sub("run/metrics.jsonl"));
  ASSERT_EQ(lines.size(), 3u);
  for (const auto& l : lines) {
    EXPECT_EQ(l["loss_scale"].get<double>(), 1024.0);  // growth_interval 2000: no growth in 6 steps
    EXPECT_EQ(l["skipped_steps"].get<std::int64_t>(), 0);
    EXPECT_TRUE(std::isfinite(l["loss"].get<double>()));
  }
}

TEST(RunTrainingPrecision, Bf16LinesHaveScaleOne) {
  testing::TempDir tmp;
  ASSERT_EQ(run_training(short_run("bf16"), RunOptions{tmp.sub("run")}), 0);
  for (const auto& l : training_lines(tmp.sub("run/metrics.jsonl"))) {
    EXPECT_EQ(l["loss_scale"].get<double>(), 1.0);
    EXPECT_EQ(l["skipped_steps"].get<std::int64_t>(), 0);
  }
}

// A loss scale of 1e30 overflows fp16 on every step; with the minimum there too, the scaler
// gives up after max_skipped_steps_at_min = 3 steps.
TEST(RunTrainingPrecision, PersistentFp16OverflowStopsTheRunWithTheScalersMessage) {
  testing::TempDir tmp;
  Config c = short_run("fp16");
  c.training.log_interval = 1;
  c.precision.loss_scale.initial_scale = 1e30;
  c.precision.loss_scale.min_loss_scale = 1e30;
  c.precision.loss_scale.max_skipped_steps_at_min = 3;
  try {
    run_training(c, RunOptions{tmp.sub("run")});
    FAIL() << "the run trained on with overflowing gradients";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("minimum loss scale"), std::string::npos) << e.what();
  }
  // Steps 1 and 2 were skipped and logged; step 3 threw before its line.
  const auto lines = training_lines(tmp.sub("run/metrics.jsonl"));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["skipped_steps"].get<std::int64_t>(), 1);
  EXPECT_EQ(lines[1]["skipped_steps"].get<std::int64_t>(), 2);
  EXPECT_EQ(lines[1]["loss_scale"].get<double>(), 1e30);
}

}  // namespace
}  // namespace memtrain::train
