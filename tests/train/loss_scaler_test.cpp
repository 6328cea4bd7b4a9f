// LossScaler against closed forms of torch.cuda.amp.GradScaler's documented rules
// (torch/cuda/amp/grad_scaler.py: "if inf/NaN are found, the step is skipped and the scale is
// multiplied by backoff_factor; if growth_interval unskipped iterations occurred
// consecutively, the scale is multiplied by growth_factor") and Megatron-LM's hysteresis.
#include "runtime/train/loss_scaler.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>

#include "runtime/core/errors.hpp"

namespace memtrain::train {
namespace {

LossScaleConfig defaults() { return LossScaleConfig{}; }

TEST(LossScaler, StartsAtTheInitialScale) {
  LossScaler s(defaults(), /*enabled=*/true);
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.skipped_steps(), 0);
  EXPECT_EQ(s.growth_tracker(), 0);
}

TEST(LossScaler, OverflowSkipsTheStepAndHalvesTheScale) {
  LossScaler s(defaults(), true);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.growth_tracker(), 5);
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 32768.0);
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_EQ(s.growth_tracker(), 0);  // an overflow restarts the count toward growth
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 16384.0);
  EXPECT_EQ(s.skipped_steps(), 2);
}

TEST(LossScaler, TwoThousandCleanStepsGrowTheScaleExactlyOnce) {
  LossScaler s(defaults(), true);
  for (int i = 0; i < 1999; ++i) ASSERT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.growth_tracker(), 1999);
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 131072.0);
  EXPECT_EQ(s.growth_tracker(), 0);
  for (int i = 0; i < 1999; ++i) ASSERT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 131072.0);
  EXPECT_EQ(s.skipped_steps(), 0);
}

// Growing every step, the scale doubles from 2^16 until the next doubling would not be finite
// as a float (2^128 > FLT_MAX), so it saturates at 2^127 and stays there.
TEST(LossScaler, GrowthEveryStepSaturatesBelowFloatInfinity) {
  LossScaleConfig c;
  c.growth_interval = 1;
  LossScaler s(c, true);
  for (int k = 1; k <= 5000; ++k) {
    ASSERT_FALSE(s.update(false));
    ASSERT_EQ(s.scale(), std::ldexp(1.0, std::min(16 + k, 127))) << "step " << k;
  }
  EXPECT_TRUE(std::isfinite(static_cast<float>(s.scale())));
  EXPECT_TRUE(s.update(true));  // and it still backs off from there
  EXPECT_EQ(s.scale(), std::ldexp(1.0, 126));
}

TEST(LossScaler, HysteresisTwoNeedsTwoConsecutiveOverflowsToBackOff) {
  LossScaleConfig c;
  c.hysteresis = 2;
  LossScaler s(c, true);
  EXPECT_TRUE(s.update(true));  // skipped, but the scale is kept
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 32768.0);
  EXPECT_TRUE(s.update(true));  // still overflowing: backs off at every further overflow
  EXPECT_EQ(s.scale(), 16384.0);
  EXPECT_FALSE(s.update(false));  // a clean step resets the count
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 16384.0);
  EXPECT_FALSE(s.update(false));
  EXPECT_TRUE(s.update(true));  // isolated overflows never back off
  EXPECT_EQ(s.scale(), 16384.0);
  EXPECT_EQ(s.skipped_steps(), 5);
}

TEST(LossScaler, BackOffStopsAtTheMinimumScale) {
  LossScaleConfig c;
  c.initial_scale = 4;
  c.min_loss_scale = 3;
  c.max_skipped_steps_at_min = 100;
  LossScaler s(c, true);
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 3.0);  // max(4 * 0.5, 3)
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 3.0);
}

TEST(LossScaler, PersistentOverflowAtTheMinimumStopsTheRun) {
  LossScaleConfig c;
  c.initial_scale = 4;
  c.min_loss_scale = 1;
  c.max_skipped_steps_at_min = 3;
  LossScaler s(c, true);
  EXPECT_TRUE(s.update(true));    // 4 -> 2
  EXPECT_TRUE(s.update(true));    // 2 -> 1: this step ran at 2, not at the minimum
  EXPECT_TRUE(s.update(true));    // 1st at the minimum
  EXPECT_TRUE(s.update(true));    // 2nd
  EXPECT_FALSE(s.update(false));  // a clean step restarts the count
  EXPECT_TRUE(s.update(true));
  EXPECT_TRUE(s.update(true));
  try {
    s.update(true);
    FAIL() << "expected RuntimeError";
  } catch (const RuntimeError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("fp16 gradients overflowed 3 consecutive steps at the minimum loss scale 1,"
                       " so training on would train on garbage"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("bf16"), std::string::npos) << msg;  // says what to do
  }
}

// Note [One rule for steps that cannot be taken]: fp32/bf16 skip non-finite steps too, at
// scale 1, and max_skipped_steps_at_min consecutive ones end the run.
TEST(LossScaler, DisabledScalerIsOneSkipsNonFiniteStepsAndGivesUpOnAStreak) {
  LossScaler s(defaults(), /*enabled=*/false);
  EXPECT_FALSE(s.enabled());
  for (int i = 0; i < 3000; ++i) {
    ASSERT_EQ(s.update(i % 2 == 0), i % 2 == 0);
    ASSERT_EQ(s.scale(), 1.0);
  }
  EXPECT_EQ(s.skipped_steps(), 1500);
  const int limit = defaults().max_skipped_steps_at_min;
  for (int i = 1; i < limit; ++i) ASSERT_TRUE(s.update(true));
  EXPECT_THROW(s.update(true), NonFiniteStreak);
  LossScaler::State st;
  st.scale = 1024;
  s.load(st);
  EXPECT_EQ(s.scale(), 1.0);
}

// PyTorch's update rule transcribed from aten/src/ATen/native/cuda/AmpKernels.cu
// (_amp_update_scale_cuda_kernel), scale a float32: the reference for hysteresis = 1.
struct TorchReference {
  float scale;
  int growth_tracker = 0;
  void update(bool found_inf, float growth, float backoff, int interval) {
    if (found_inf) {
      scale *= backoff;
      growth_tracker = 0;
    } else {
      const int successful = growth_tracker + 1;
      if (successful == interval) {
        const float grown = scale * growth;
        if (std::isfinite(grown)) scale = grown;
        growth_tracker = 0;
      } else {
        growth_tracker = successful;
      }
    }
  }
};

TEST(LossScaler, FollowsPyTorchsUpdateRuleOnARandomOverflowSequence) {
  LossScaleConfig c;
  c.initial_scale = 1024;
  // Overflows at 10% and growth after 4 clean steps: the scale drifts up into the float
  // saturation and comes back down often, exercising every branch.
  c.growth_interval = 4;
  c.min_loss_scale = 1e-30;  // out of the way: PyTorch has no minimum
  c.max_skipped_steps_at_min = 1000000;
  LossScaler s(c, true);
  TorchReference ref{.scale = 1024.0f};
  std::mt19937 gen(11);
  std::bernoulli_distribution overflow(0.1);
  std::int64_t skipped = 0;
  for (int i = 0; i < 20000; ++i) {
    const bool inf = overflow(gen);
    ASSERT_EQ(s.update(inf), inf) << "step " << i;
    ref.update(inf, 2.0f, 0.5f, 4);
    skipped += inf ? 1 : 0;
    ASSERT_EQ(s.scale(), static_cast<double>(ref.scale)) << "step " << i;
    ASSERT_EQ(s.growth_tracker(), ref.growth_tracker) << "step " << i;
    ASSERT_GT(s.scale(), 1e-20) << "the sequence reached the minimum; pick another seed";
  }
  EXPECT_EQ(s.skipped_steps(), skipped);
}

TEST(LossScaler, ResumingFromASavedStateContinuesIdentically) {
  LossScaleConfig c;
  c.growth_interval = 5;
  c.hysteresis = 2;
  LossScaler a(c, true);
  std::mt19937 gen(3);
  std::bernoulli_distribution overflow(0.3);
  for (int i = 0; i < 101; ++i) a.update(overflow(gen));
  LossScaler b(c, true);
  b.load(a.state());
  EXPECT_EQ(b.state(), a.state());
  for (int i = 0; i < 500; ++i) {
    const bool inf = overflow(gen);
    ASSERT_EQ(a.update(inf), b.update(inf));
    ASSERT_EQ(a.state(), b.state());
  }
}

TEST(LossScaler, LoadRejectsAnOutOfRangeState) {
  LossScaler s(defaults(), true);
  LossScaler::State bad;
  bad.scale = std::nan("");
  EXPECT_THROW(s.load(bad), ConfigError);
  bad = {};
  bad.growth_tracker = 2000;  // == growth_interval: the growth would have happened
  try {
    s.load(bad);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("growth_tracker must be in [0, "
                                         "precision.loss_scale.growth_interval = 2000), got 2000"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(s.scale(), 65536.0);  // a rejected state changes nothing
}

struct BadKey {
  const char* key;
  void (*set)(LossScaleConfig&);
  const char* message;
};

class LossScalerConfig : public ::testing::TestWithParam<BadKey> {};

TEST_P(LossScalerConfig, RejectsTheBadValueNamingTheKey) {
  LossScaleConfig c;
  GetParam().set(c);
  for (const bool enabled : {true, false}) {
    try {
      LossScaler s(c, enabled);
      FAIL() << "expected ConfigError for " << GetParam().key;
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()), GetParam().message);
    }
  }
  EXPECT_THROW(LossScaler::validate(c), ConfigError);
}

INSTANTIATE_TEST_SUITE_P(
    EveryKey, LossScalerConfig,
    ::testing::Values(
        BadKey{"initial_scale", [](LossScaleConfig& c) { c.initial_scale = 0; },
               "precision.loss_scale.initial_scale must be a normal float (in [1.18e-38, 3.40e38]), got 0"},
        BadKey{"initial_scale_inf", [](LossScaleConfig& c) { c.initial_scale = INFINITY; },
               "precision.loss_scale.initial_scale must be a normal float (in [1.18e-38, 3.40e38]), got inf"},
        // 1 / 1e-40 is inf in float: the unscaled gradients would be NaN.
        BadKey{"initial_scale_subnormal",
               [](LossScaleConfig& c) {
                 c.initial_scale = 1e-40;
                 c.min_loss_scale = 1e-40;
               },
               "precision.loss_scale.initial_scale must be a normal float (in [1.18e-38, 3.40e38]), got 1e-40"},
        BadKey{"growth_factor", [](LossScaleConfig& c) { c.growth_factor = 0.5; },
               "precision.loss_scale.growth_factor must be > 1, got 0.5"},
        BadKey{"backoff_factor", [](LossScaleConfig& c) { c.backoff_factor = 1; },
               "precision.loss_scale.backoff_factor must be in (0, 1), got 1"},
        BadKey{"backoff_factor_nan", [](LossScaleConfig& c) { c.backoff_factor = NAN; },
               "precision.loss_scale.backoff_factor must be in (0, 1), got nan"},
        BadKey{"growth_interval", [](LossScaleConfig& c) { c.growth_interval = 0; },
               "precision.loss_scale.growth_interval must be >= 1, got 0"},
        BadKey{"hysteresis", [](LossScaleConfig& c) { c.hysteresis = 0; },
               "precision.loss_scale.hysteresis must be >= 1, got 0"},
        BadKey{"min_loss_scale", [](LossScaleConfig& c) { c.min_loss_scale = -1; },
               "precision.loss_scale.min_loss_scale must be a normal float (in [1.18e-38, 3.40e38]), got -1"},
        BadKey{"min_above_initial", [](LossScaleConfig& c) { c.min_loss_scale = 1e6; },
               "precision.loss_scale.min_loss_scale must be <= precision.loss_scale.initial_scale"
               " = 65536, got 1e+06"},
        BadKey{"max_skipped_steps_at_min", [](LossScaleConfig& c) { c.max_skipped_steps_at_min = 0; },
               "precision.loss_scale.max_skipped_steps_at_min must be >= 1, got 0"}),
    [](const auto& info) { return std::string(info.param.key); });

TEST(LossScalerDefaults, AreValid) { EXPECT_NO_THROW(LossScaler::validate(defaults())); }

}  // namespace
}  // namespace memtrain::train
