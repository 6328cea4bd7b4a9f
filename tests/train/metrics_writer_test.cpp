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

}  // namespace
}  // namespace memtrain::train
