#include "runtime/train/metrics_writer.hpp"

#include "tests/train/metrics_keys.hpp"
#include "tests/train/temp_dir.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace memtrain::train {
namespace {

using testing::kEvalKeys;
using testing::kTrainKeys;

std::vector<nlohmann::json> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(MetricsWriter, TrainingLineHasExactlyTheIssueKeys) {
  testing::TempDir dir;
  const auto path = dir.sub("metrics.jsonl");
  {
    MetricsWriter w(path);
    TrainMetrics m;
    m.step = 10;
    m.loss = 7.5;
    m.allocated_bytes = 1234;
    w.write(m);
  }
  const auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), 1u);
  for (const auto& k : kTrainKeys) EXPECT_TRUE(lines[0].contains(k)) << k;
  EXPECT_EQ(lines[0].size(), kTrainKeys.size());
  EXPECT_EQ(lines[0]["step"], 10);
  EXPECT_DOUBLE_EQ(lines[0]["loss"].get<double>(), 7.5);
  EXPECT_EQ(lines[0]["allocated_bytes"], 1234);
}

TEST(MetricsWriter, EvalLineHasExactlyTheIssueKeys) {
  testing::TempDir dir;
  const auto path = dir.sub("metrics.jsonl");
  {
    MetricsWriter w(path);
    w.write(EvalMetrics{20, 2.0, 0.25, 7.389});
  }
  const auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), 1u);
  for (const auto& k : kEvalKeys) EXPECT_TRUE(lines[0].contains(k)) << k;
  EXPECT_EQ(lines[0].size(), kEvalKeys.size());
  EXPECT_DOUBLE_EQ(lines[0]["eval_accuracy"].get<double>(), 0.25);
}

TEST(MetricsWriter, AppendsAndNeverTruncatesAnEarlierFile) {
  testing::TempDir dir;
  const auto path = dir.sub("metrics.jsonl");
  { MetricsWriter(path).write(EvalMetrics{1, 1, 1, 1}); }
  { MetricsWriter(path).write(EvalMetrics{2, 1, 1, 1}); }
  const auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["step"], 1);
  EXPECT_EQ(lines[1]["step"], 2);
}

TEST(MetricsWriter, UnwritablePathIsARuntimeError) {
  EXPECT_THROW(MetricsWriter("/nonexistent-dir/metrics.jsonl"), std::runtime_error);
}

// A resume from the checkpoint of step 2: lines of later steps go, and so does the line a
// SIGKILL tore in half; the resumed_from line has no "step", so it survives a second resume.
TEST(MetricsTruncation, DropsLaterStepsAndATornLine) {
  testing::TempDir dir;
  const auto path = dir.sub("metrics.jsonl");
  {
    MetricsWriter w(path);
    w.write(EvalMetrics{0, 4.0, 0.1, 54.6});
    for (std::int64_t s = 1; s <= 3; ++s) w.write(TrainMetrics{s, 4.0 - s});
    w.write(EvalMetrics{2, 3.5, 0.2, 33.1});
    w.write_resumed(1, "run/checkpoints/step-00000001", 2, 1);
    w.write(EvalMetrics{3, 3.0, 0.3, 20.1});
  }
  std::ofstream(path, std::ios::app) << "{\"step\":4,\"loss\":0.";  // torn: no newline, no end
  const MetricsTruncation t = truncate_metrics_after(path, 2);
  EXPECT_EQ(t.dropped_lines, 3);  // step 3's train and eval lines, the torn one
  EXPECT_TRUE(t.eval_at_step);
  const auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0]["step"], 0);
  EXPECT_EQ(lines[2]["step"], 2);
  EXPECT_EQ(lines[3]["eval_loss"], 3.5);
  EXPECT_EQ(lines[4]["resumed_from"], 1);
  EXPECT_EQ(lines[4]["checkpoint_data_parallel_size"], 2);
  EXPECT_FALSE(truncate_metrics_after(path, 1).eval_at_step);  // step 1 has no eval line
  EXPECT_EQ(read_lines(path).size(), 3u);
  EXPECT_EQ(truncate_metrics_after(path, -1).dropped_lines, 2);  // starting over: every step
  EXPECT_EQ(read_lines(path).size(), 1u);                        // the resumed_from line
  truncate_metrics_after(dir.sub("absent.jsonl"), 3);
  EXPECT_FALSE(std::filesystem::exists(dir.sub("absent.jsonl")));
}

}  // namespace
}  // namespace memtrain::train
