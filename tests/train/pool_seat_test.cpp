// An elastic job's footprints (Note [An elastic job's footprints], runtime/train/pool_seat.hpp):
// the order, the divisors, the evaluation's micro-batch, and footprints that save nothing left
// out. The needs come from a stand-in planner whose figure is a closed form of the config, so
// each expected list is worked out by hand. Also the pool event lines of metrics.jsonl.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/train/metrics_writer.hpp"
#include "runtime/train/pool_seat.hpp"
#include "tests/train/temp_dir.hpp"
#include "tests/train/tiny_config.hpp"

namespace memtrain::train {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

// 10 MiB of state, plus 2 MiB per sequence of a micro-batch without recompute, 1 MiB with full.
std::size_t stand_in_need(const Config& c) {
  const std::size_t per_sequence = c.memory.recompute == "full" ? 1 : 2;
  return (10 + per_sequence * static_cast<std::size_t>(c.training.micro_batch_size)) * MiB;
}

Config elastic_config(int micro_batch, int floor) {
  Config c = testing::tiny_mock_config();
  c.training.micro_batch_size = micro_batch;
  c.training.global_batch_size = 24;
  c.memory.elastic = true;
  c.memory.elastic_min_micro_batch = floor;
  return c;
}

TEST(ElasticFootprints, ConfiguredThenRecomputeThenEverySmallerDivisorDownToTheFloor) {
  const auto f = elastic_footprints(elastic_config(12, 2), 24, stand_in_need);
  // 12 none: 10 + 24; 12 full: 10 + 12; then full at 8 (24 % 8 == 0, but 12 % 8 != 0: skipped),
  // 6, 4, 3, 2 (divide both 24 and the evaluation's 12).
  ASSERT_EQ(f.size(), 6u);
  EXPECT_EQ(f[0].micro_batch_size, 12);
  EXPECT_EQ(f[0].recompute, "none");
  EXPECT_EQ(f[0].need_bytes, 34 * MiB);
  EXPECT_EQ(f[1].micro_batch_size, 12);
  EXPECT_EQ(f[1].recompute, "full");
  EXPECT_EQ(f[1].need_bytes, 22 * MiB);
  const int sizes[] = {6, 4, 3, 2};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(f[2 + i].micro_batch_size, sizes[i]);
    EXPECT_EQ(f[2 + i].recompute, "full");
    EXPECT_EQ(f[2 + i].need_bytes, (10 + static_cast<std::size_t>(sizes[i])) * MiB);
  }
}

TEST(ElasticFootprints, AFloorAtTheMicroBatchLeavesOnlyRecompute) {
  const auto f = elastic_footprints(elastic_config(12, 12), 24, stand_in_need);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[1].recompute, "full");
  EXPECT_EQ(f[1].micro_batch_size, 12);
}

TEST(ElasticFootprints, AFootprintThatSavesNothingIsLeftOut) {
  // A planner that sees no difference between the settings: only the configured footprint.
  const auto f = elastic_footprints(elastic_config(12, 1), 24, [](const Config&) { return 40 * MiB; });
  EXPECT_EQ(f.size(), 1u);
}

TEST(ElasticFootprints, AJobThatIsNotElasticHasOneFootprint) {
  Config c = elastic_config(12, 1);
  c.memory.elastic = false;
  const auto f = elastic_footprints(c, 24, stand_in_need);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].describe(), "micro-batch 12, recompute none, 34.00 MiB");
}

TEST(ElasticFootprints, TheEvaluationsMicroBatchMustBeDividedToo) {
  Config c = elastic_config(12, 1);
  c.training.eval_micro_batch_size = 8;
  const auto f = elastic_footprints(c, 24, stand_in_need);
  // Divisors of 24 below 12 that divide 8: 8, 4, 2, 1.
  std::vector<int> sizes;
  for (std::size_t i = 2; i < f.size(); ++i) sizes.push_back(f[i].micro_batch_size);
  EXPECT_EQ(sizes, (std::vector<int>{8, 4, 2, 1}));
}

TEST(ElasticFootprints, SixteenBitGradientsShrinkByRecomputeOnly) {
  Config c = elastic_config(12, 1);
  c.precision.dtype = "bf16";
  const auto f = elastic_footprints(c, 24, stand_in_need);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[1].recompute, "full");
  EXPECT_EQ(f[1].micro_batch_size, 12);
  c.precision.fp32_grad_accumulation = true;                       // fp32 sums: splits are within rounding again
  EXPECT_EQ(elastic_footprints(c, 24, stand_in_need).size(), 7u);  // and 6, 4, 3, 2, 1
}

TEST(PoolEvents, ALineHasTheStepTheEventTheFootprintsAndTheReason) {
  testing::TempDir tmp;
  const std::string path = tmp.sub("metrics.jsonl");
  const Footprint big{16, "none", "uniform", 0, 34 * MiB}, small{8, "full", "uniform", 0, 18 * MiB};
  {
    MetricsWriter w(path);
    w.write_pool_event(53, "shrink", &big, &small, "a job of higher priority waits");
    w.write_pool_event(60, "preempt", &small, nullptr, "shrinking is not enough");
  }
  std::ifstream in(path);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["step"], 53);
  EXPECT_EQ(j["event"], "shrink");
  EXPECT_EQ(j["from"]["micro_batch_size"], 16);
  EXPECT_EQ(j["from"]["recompute"], "none");
  EXPECT_EQ(j["to"]["micro_batch_size"], 8);
  EXPECT_EQ(j["to"]["need_bytes"], 18 * MiB);
  EXPECT_EQ(j["why"], "a job of higher priority waits");
  ASSERT_TRUE(std::getline(in, line));
  const auto k = nlohmann::json::parse(line);
  EXPECT_EQ(k["event"], "preempt");
  EXPECT_TRUE(k["to"].is_object());
  EXPECT_TRUE(k["to"].empty());
}

}  // namespace
}  // namespace memtrain::train
