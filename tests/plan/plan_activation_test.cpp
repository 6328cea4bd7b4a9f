// Per-layer activation bytes of a dry-run step against closed forms: Korthikanti et al. 2022,
// Table 2, and the per-tensor account of docs/memory-plan.md (what each encoder layer keeps,
// e bytes per element: 16·e·sbh + e·as²b + 16·sb for the standard core).
#include <gtest/gtest.h>

#include <string>

#include "runtime/plan/plan_analytic.hpp"
#include "runtime/plan/plan_step.hpp"
#include "tests/train/tiny_config.hpp"

namespace memtrain::train {
namespace {

constexpr std::int64_t s = testing::kActS, b = testing::kActB, h = testing::kActH, a = testing::kActA;

Config layer_config(const std::string& dtype, const std::string& recompute, const std::string& attention) {
  Config c = testing::activation_layer_config(3);
  c.precision.dtype = dtype;
  c.memory.recompute = recompute;
  c.memory.attention = attention;
  return c;
}

std::int64_t per_layer(const Config& c) { return measure_activation_bytes_per_layer(c, 1, measure_step(c, 1)); }

TEST(PlanActivation, KorthikantiTable2ForBertLarge) {
  Config c = layer_config("bf16", "none", "standard");
  c.data.seq_length = 512;
  c.training.micro_batch_size = 8;
  c.model.hidden_size = 1024;
  c.model.num_attention_heads = 16;
  const auto k = korthikanti_activation_bytes(c);
  // 512*8*1024 = 4,194,304; x34 = 142,606,336; 5*16*512^2*8 = 167,772,160.
  EXPECT_DOUBLE_EQ(k.no_recompute, 142'606'336.0 + 167'772'160.0);
  EXPECT_DOUBLE_EQ(k.selective_recompute, 142'606'336.0);
  EXPECT_DOUBLE_EQ(k.full_recompute, 2.0 * 4'194'304);
  EXPECT_FALSE(k.tensor_parallel.has_value());
  // Table 2's tensor-parallel rows at t = 4: sbh(10 + 24/4 + 5as/(4h)) and sbh(10 + 24/4).
  c.parallel.tensor_model_parallel_size = 4;
  EXPECT_DOUBLE_EQ(*korthikanti_activation_bytes(c).tensor_parallel, 4'194'304.0 * 16.0 + 167'772'160.0 / 4.0);
  c.memory.recompute = "selective";
  EXPECT_DOUBLE_EQ(*korthikanti_activation_bytes(c).tensor_parallel, 4'194'304.0 * 16.0);
}

// One rank of a tensor-parallel group keeps the replicated tensors whole (the layer input, the
// attention block's output and the two LayerNorm inputs: 4 sbh, plus the LayerNorm
// statistics) and 1/t of the split ones (q, k, v, context: 4 sbh; the MLP's pre-activation and
// GELU output: 8 sbh; the probabilities as²b). The per-rank figure comes from dry-running that
// rank of a simulated tp x dp grid, as `memtrain plan --world-size t` does.
TEST(PlanActivation, TensorParallelRankKeepsItsShareOfTheSplitTensors) {
  const std::int64_t sbh = s * b * h, as2b = a * s * s * b, stats = 16 * s * b;
  for (int t : {2, 4}) {
    Config c = layer_config("fp32", "none", "standard");
    c.parallel.tensor_model_parallel_size = t;
    EXPECT_EQ(measure_activation_bytes_per_layer(c, t, measure_step(c, t)),
              4 * (4 * sbh + 12 * sbh / t + as2b / t) + stats)
        << "t = " << t;
    c.precision.dtype = "bf16";
    c.memory.recompute = "selective";
    EXPECT_EQ(measure_activation_bytes_per_layer(c, t, measure_step(c, t)), 2 * (4 * sbh + 12 * sbh / t) + stats)
        << "t = " << t;
  }
}

// Sequence parallelism divides the replicated tensors (and the LayerNorm statistics) by t as
// well: every stored activation of a layer is the rank's 1/t (Note [Sequence-parallel
// regions]); Korthikanti's sbh(34/t + 5as/(ht)) at 16 bits.
TEST(PlanActivation, SequenceParallelRankKeepsATthOfEverything) {
  const std::int64_t sbh = s * b * h, as2b = a * s * s * b, stats = 16 * s * b;
  for (int t : {2, 4}) {
    Config c = layer_config("fp32", "none", "standard");
    c.parallel.tensor_model_parallel_size = t;
    c.parallel.sequence_parallel = true;
    EXPECT_EQ(measure_activation_bytes_per_layer(c, t, measure_step(c, t)), 4 * (16 * sbh + as2b) / t + stats / t)
        << "t = " << t;
    c.memory.recompute = "full";
    EXPECT_EQ(measure_activation_bytes_per_layer(c, t, measure_step(c, t)), 4 * sbh / t) << "t = " << t;
    EXPECT_DOUBLE_EQ(*korthikanti_activation_bytes(c).tensor_parallel, 2.0 * sbh / t);
  }
}

TEST(PlanActivation, StandardLayerKeepsSixteenHiddenSizedTensorsAndTheProbabilities) {
  const std::int64_t sbh = s * b * h, as2b = a * s * s * b, stats = 16 * s * b;
  EXPECT_EQ(per_layer(layer_config("fp32", "none", "standard")), 4 * (16 * sbh + as2b) + stats);
  EXPECT_EQ(per_layer(layer_config("bf16", "none", "standard")), 2 * (16 * sbh + as2b) + stats);
  EXPECT_EQ(per_layer(layer_config("fp16", "none", "standard")), 2 * (16 * sbh + as2b) + stats);
}

TEST(PlanActivation, SelectiveAndFlashDropTheProbabilities) {
  const std::int64_t sbh = s * b * h, stats = 16 * s * b, lse = 4 * a * s * b;
  EXPECT_EQ(per_layer(layer_config("bf16", "selective", "standard")), 2 * 16 * sbh + stats);
  EXPECT_EQ(per_layer(layer_config("bf16", "none", "flash")), 2 * 16 * sbh + stats + lse);
}

// Korthikanti's full-recompute row: the layer input only, 2sbh at 16 bits.
TEST(PlanActivation, FullRecomputeKeepsTheLayerInputOnly) {
  const Config c = layer_config("bf16", "full", "standard");
  EXPECT_EQ(per_layer(c), static_cast<std::int64_t>(korthikanti_activation_bytes(c).full_recompute));
  EXPECT_EQ(per_layer(layer_config("fp32", "full", "standard")), 4 * s * b * h);
}

}  // namespace
}  // namespace memtrain::train
