// A running job changes, at a step boundary, what costs memory and not what is computed
// (design.md, "Many jobs on one pool"; issue 43): a smaller micro-batch with more accumulation
// keeps the global batch, so the run ends within float rounding of the unswitched run;
// recompute is bitwise. The reference is the same run without the switch. Each switch must
// also show in the memory it saves (the peak of the steps after it), or it did nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "memory/memory_stats.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/train/trainer.hpp"
#include "tests/train/temp_dir.hpp"
#include "tests/train/tiny_config.hpp"

namespace memtrain::train {
namespace {

// 20 steps with dropout (the masks are keyed by global sample index, so a split must not move
// them), two micro-batches of 8 per step, at configs/tiny.yaml's learning rate (Adam's update
// divides by the gradient's own scale, so its rounding differences grow with the rate).
Config switch_config() {
  Config c = testing::tiny_mock_config();
  c.model.hidden_dropout_prob = 0.1f;
  c.model.attention_probs_dropout_prob = 0.1f;
  c.training.lr = 1e-3;
  c.training.max_steps = 20;
  c.training.micro_batch_size = 8;
  c.training.global_batch_size = 16;
  c.training.eval_interval = 100;
  c.training.eval_steps = 1;
  return c;
}

struct Outcome {
  std::vector<std::vector<float>> parameters;            // at the last boundary, f32 values
  std::map<std::int64_t, std::int64_t> step_peak_bytes;  // step -> peak allocated bytes during it
};

// Runs `config`, calling `change` at every boundary; records each step's peak allocated bytes
// (the peak is reset at every boundary) and the final parameters.
Outcome run(const Config& config, const std::string& dir, const std::function<void(StepBoundary&)>& change) {
  Outcome o;
  RunOptions options{dir};
  options.at_step_boundary = [&](StepBoundary& b) {
    if (b.steps_done() > 0) o.step_peak_bytes[b.steps_done()] = b.memory_stats().allocated_bytes.peak;
    if (change) change(b);
    b.reset_peak_memory_stats();
    if (b.steps_done() == config.training.max_steps) {
      o.parameters.clear();
      for (const auto& p : b.parameters()) {
        const float* v = p.value.data<float>();
        o.parameters.emplace_back(v, v + p.value.numel());
      }
    }
  };
  EXPECT_EQ(run_training(config, options), 0);
  return o;
}

// ||a - b|| / ||b|| over every parameter, in double.
double relative_difference(const Outcome& a, const Outcome& b) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < b.parameters.size(); ++i) {
    for (std::size_t j = 0; j < b.parameters[i].size(); ++j) {
      const double d = static_cast<double>(a.parameters[i][j]) - b.parameters[i][j];
      diff += d * d;
      norm += static_cast<double>(b.parameters[i][j]) * b.parameters[i][j];
    }
  }
  return std::sqrt(diff / norm);
}

bool bitwise_equal(const Outcome& a, const Outcome& b) { return a.parameters == b.parameters; }

TEST(StepBoundary, MicroBatchSwitchKeepsTheGlobalBatchAndSavesActivationMemory) {
  testing::TempDir tmp;
  const Config c = switch_config();
  const Outcome straight = run(c, tmp.sub("straight"), {});
  const Outcome switched = run(c, tmp.sub("switched"), [](StepBoundary& b) {
    if (b.steps_done() == 5) b.set_micro_batch_size(2);
    if (b.steps_done() == 12) b.set_micro_batch_size(8);
    EXPECT_EQ(b.micro_batch_size(), b.steps_done() >= 5 && b.steps_done() < 12 ? 2 : 8);
  });
  ASSERT_EQ(straight.parameters.size(), switched.parameters.size());
  ASSERT_FALSE(straight.parameters.empty());
  // Eight micro-batches of 2 instead of two of 8: the same samples, masks and dropout, other
  // summation order. The bound; measured about 1e-7.
  EXPECT_LT(relative_difference(switched, straight), 1e-6);
  // Steps 6..12 ran micro-batches of 2: a quarter of the activations of the same steps at 8.
  for (std::int64_t step = 6; step <= 12; ++step) {
    EXPECT_LT(switched.step_peak_bytes.at(step), straight.step_peak_bytes.at(step)) << "step " << step;
  }
}

TEST(StepBoundary, RecomputeSwitchIsBitwiseAndSavesActivationMemory) {
  testing::TempDir tmp;
  const Config c = switch_config();
  const Outcome straight = run(c, tmp.sub("straight"), {});
  const Outcome switched = run(c, tmp.sub("switched"), [](StepBoundary& b) {
    if (b.steps_done() == 5) b.set_recompute(models::Recompute::full, models::RecomputeMethod::uniform, 0);
    if (b.steps_done() == 12) b.set_recompute(models::Recompute::none, models::RecomputeMethod::uniform, 0);
  });
  ASSERT_FALSE(straight.parameters.empty());
  EXPECT_TRUE(bitwise_equal(switched, straight));
  for (std::int64_t step = 6; step <= 12; ++step) {
    EXPECT_LT(switched.step_peak_bytes.at(step), straight.step_peak_bytes.at(step)) << "step " << step;
  }
}

// Selective recompute keeps the probabilities out of memory and rebuilds them bitwise.
TEST(StepBoundary, SelectiveRecomputeSwitchIsBitwise) {
  testing::TempDir tmp;
  const Config c = switch_config();
  const Outcome straight = run(c, tmp.sub("straight"), {});
  const Outcome switched = run(c, tmp.sub("switched"), [](StepBoundary& b) {
    if (b.steps_done() == 3) b.set_recompute(models::Recompute::selective, models::RecomputeMethod::uniform, 0);
    if (b.steps_done() == 9) b.set_recompute(models::Recompute::none, models::RecomputeMethod::uniform, 0);
  });
  EXPECT_TRUE(bitwise_equal(switched, straight));
}

// Released cache is reserved memory given back (the reserved bytes fall by what the call
// returns), and the next steps run as they would have (they reserve again). A BERT-vocabulary
// head makes the [M, V] logits large enough for segments of their own, which are free between
// steps.
TEST(StepBoundary, ReleasingCachedMemoryReturnsTheCacheAndTrainingGoesOn) {
  testing::TempDir tmp;
  Config c = switch_config();
  c.model.vocab_size = 30522;
  c.model.max_position_embeddings = 128;
  c.data.seq_length = 128;
  c.training.max_steps = 3;
  const Outcome straight = run(c, tmp.sub("straight"), {});
  std::size_t released = 0;
  const Outcome released_run = run(c, tmp.sub("released"), [&](StepBoundary& b) {
    if (b.steps_done() == 0) return;
    const auto before = b.memory_stats();
    const std::size_t r = b.release_cached_memory();
    const auto after = b.memory_stats();
    EXPECT_EQ(static_cast<std::int64_t>(r), before.reserved_bytes.current - after.reserved_bytes.current);
    released += r;
  });
  EXPECT_GT(released, 0u);
  EXPECT_TRUE(bitwise_equal(released_run, straight));
}

TEST(StepBoundary, AMicroBatchThatDoesNotDivideTheBatchIsRefused) {
  testing::TempDir tmp;
  Config c = switch_config();
  c.training.max_steps = 2;
  RunOptions options{tmp.sub("run")};
  options.at_step_boundary = [](StepBoundary& b) {
    if (b.steps_done() == 1) b.set_micro_batch_size(3);
  };
  EXPECT_THROW(run_training(c, options), ConfigError);
}

}  // namespace
}  // namespace memtrain::train
