// Per-layer activation bytes under partial recompute (Note [Per-layer activations under
// partial recompute]): a checkpointed and a stored layer are measured apart, each equal to the
// per-tensor account of docs/memory-plan.md (fp32, e = 4: the layer input 4·sbh when
// checkpointed by full recompute; 4·(16·sbh + as²b) + 16·sb when stored).
#include "runtime/plan/plan_layer_activation.hpp"

#include <gtest/gtest.h>

#include <string>

#include "runtime/plan/plan_step.hpp"
#include "tests/train/tiny_config.hpp"

namespace memtrain::train {
namespace {

constexpr std::int64_t s = testing::kActS, b = testing::kActB, h = testing::kActH, a = testing::kActA;
constexpr std::int64_t sbh = s * b * h, as2b = a * s * s * b, stats = 16 * s * b;
constexpr std::int64_t kStoredFp32 = 4 * (16 * sbh + as2b) + stats;
constexpr std::int64_t kFullCheckpointedFp32 = 4 * sbh;

Config four_layers(const std::string& recompute, const std::string& method, int num_layers) {
  Config c = testing::activation_layer_config(4);
  c.training.max_steps = 1;
  c.memory.recompute = recompute;
  c.memory.recompute_method = method;
  c.memory.recompute_num_layers = num_layers;
  return c;
}

LayerActivationBytes measure(const Config& c) { return measure_layer_activation_bytes(c, 1, measure_step(c, 1)); }

// QA's case in small: every 2nd layer checkpointed (layers 0 and 2), so the last layer is a
// stored one and "L minus L - 1" alone would report a stored layer as the checkpointed figure.
TEST(PlanLayerActivation, PartialUniformRecomputeReportsBothKindsApart) {
  const auto r = measure(four_layers("full", "uniform", 2));
  EXPECT_EQ(r.checkpointed_layers, 2);
  EXPECT_EQ(r.num_layers, 4);
  ASSERT_TRUE(r.partial());
  EXPECT_EQ(*r.checkpointed, kFullCheckpointedFp32);
  EXPECT_EQ(*r.not_checkpointed, kStoredFp32);
}

TEST(PlanLayerActivation, PartialBlockRecomputeReportsBothKindsApart) {
  const auto r = measure(four_layers("full", "block", 3));
  EXPECT_EQ(r.checkpointed_layers, 3);
  ASSERT_TRUE(r.partial());
  EXPECT_EQ(*r.checkpointed, kFullCheckpointedFp32);
  EXPECT_EQ(*r.not_checkpointed, kStoredFp32);
}

TEST(PlanLayerActivation, EveryLayerCheckpointedHasNoStoredFigure) {
  const auto r = measure(four_layers("full", "uniform", 0));
  EXPECT_EQ(r.checkpointed_layers, 4);
  EXPECT_FALSE(r.not_checkpointed.has_value());
  ASSERT_TRUE(r.checkpointed.has_value());
  EXPECT_EQ(*r.checkpointed, kFullCheckpointedFp32);
}

TEST(PlanLayerActivation, NoRecomputeHasNoCheckpointedFigure) {
  const auto r = measure(four_layers("none", "uniform", 0));
  EXPECT_EQ(r.checkpointed_layers, 0);
  EXPECT_FALSE(r.checkpointed.has_value());
  ASSERT_TRUE(r.not_checkpointed.has_value());
  EXPECT_EQ(*r.not_checkpointed, kStoredFp32);
}

}  // namespace
}  // namespace memtrain::train
