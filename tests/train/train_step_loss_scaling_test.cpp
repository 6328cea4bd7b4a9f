// Dynamic loss scaling inside train_step (issue 5): an overflowing fp16 step is skipped with
// parameters, masters, moments and the optimizer's step count untouched and the scale backed
// off; a clean step is unscaled before clipping (its gradient norm is the fp32 model's, to fp16
// rounding: the fp32 model is the reference); the scaler's give-up error stops the step; fp32
// without loss scaling is bitwise the step of before.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>

#include "comms/single_rank_communicator.hpp"
#include "runtime/config/model_options_from_config.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/train/model_memory.hpp"
#include "runtime/train/train_step.hpp"
#include "tests/train/tiny_config.hpp"

namespace memtrain::train {
namespace {

struct StepRig {
  explicit StepRig(const Config& c)
      : allocator(make_model_allocator(c.memory)),
        ctx(allocator),
        model(c.model, ctx, model_options(c)),
        data(data::MlmDataset::mock(c.data, c.model.vocab_size, c.training.seed)),
        optimizer(model.parameters(), ctx, AdamWOptions{}),
        scaler(c.precision.loss_scale, c.precision.dtype == "fp16"),
        gradient_sync(model.gradient_buckets(), comm, ctx) {
    model.init_parameters(c.training.seed);
  }
  // Every byte of every parameter value, master and moment, to compare states bitwise.
  std::vector<unsigned char> state_bytes() const {
    std::vector<unsigned char> out;
    auto append = [&](const core::Tensor& t) {
      if (!t.defined()) return;
      const auto* p = static_cast<const unsigned char*>(t.block().ptr);
      out.insert(out.end(), p, p + t.nbytes());
    };
    for (std::size_t i = 0; i < model.parameters().size(); ++i) {
      append(model.parameters()[i].value);
      append(model.parameters()[i].master);
      append(optimizer.exp_avg(i));
      append(optimizer.exp_avg_sq(i));
    }
    return out;
  }
  StepResult step(std::int64_t index, bool with_scaler = true) {
    const auto plan = BatchPlan::make(16, 8, 1, 0);
    return train_step(model, data, plan, comm, optimizer, index, StepSettings{1e-3, 1.0, 1},
                      with_scaler ? &scaler : nullptr, &gradient_sync);
  }

  comms::SingleRankCommunicator comm;
  std::shared_ptr<memory::CachingAllocator> allocator;
  core::Context ctx;
  models::BertForMaskedLM model;
  data::MlmDataset data;
  AdamW optimizer;
  LossScaler scaler;
  comms::GradientSynchronizer gradient_sync;
};

Config fp16_config(double initial_scale) {
  Config c = testing::tiny_mock_config();
  c.precision.dtype = "fp16";
  c.precision.loss_scale.initial_scale = initial_scale;
  c.precision.loss_scale.min_loss_scale = 1.0;
  return c;
}

// 1e30 / (masked tokens) as the seed of backward is far past fp16's 65504: the gradients hold
// inf or NaN, as a real overflow would.
TEST(TrainStepLossScaling, OverflowSkipsTheStepAndBacksOffLeavingTheStateUntouched) {
  StepRig s(fp16_config(1e30));
  const auto before = s.state_bytes();
  const StepResult r = s.step(0);
  EXPECT_TRUE(r.skipped);
  EXPECT_EQ(r.loss_scale, 1e30);
  EXPECT_EQ(r.skipped_steps, 1);
  EXPECT_TRUE(std::isnan(r.grad_norm));
  EXPECT_TRUE(std::isfinite(r.loss));  // the loss itself is not scaled
  EXPECT_EQ(s.optimizer.step_count(), 0);
  EXPECT_EQ(s.scaler.scale(), 1e30 * 0.5);  // backoff_factor 0.5
  EXPECT_TRUE(s.state_bytes() == before);
}

TEST(TrainStepLossScaling, CleanStepIsUnscaledBeforeClippingAndMatchesTheFp32Norm) {
  Config c32 = testing::tiny_mock_config();
  StepRig fp32(c32), fp16(fp16_config(1024));
  const StepResult r32 = fp32.step(0, /*with_scaler=*/false);
  const StepResult r16 = fp16.step(0);
  EXPECT_FALSE(r16.skipped);
  EXPECT_EQ(r16.loss_scale, 1024.0);
  EXPECT_EQ(r16.skipped_steps, 0);
  EXPECT_EQ(fp16.optimizer.step_count(), 1);
  EXPECT_EQ(fp16.scaler.growth_tracker(), 1);
  // Unscaled: a norm 1024 times too large would be off by three orders of magnitude.
  EXPECT_NEAR(r16.grad_norm, r32.grad_norm, 2e-2 * r32.grad_norm);
  EXPECT_NEAR(r16.loss, r32.loss, 1e-2 * r32.loss);
}

TEST(TrainStepLossScaling, PersistentOverflowAtTheMinimumScaleStopsWithTheScalersError) {
  Config c = fp16_config(1e30);
  c.precision.loss_scale.min_loss_scale = 1e30;
  c.precision.loss_scale.max_skipped_steps_at_min = 2;
  StepRig s(c);
  EXPECT_TRUE(s.step(0).skipped);
  try {
    s.step(1);
    FAIL() << "kept training at the minimum loss scale";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("minimum loss scale"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s.optimizer.step_count(), 0);
}

// bf16 has float's exponent range: no scaler is enabled, nothing is skipped, and the step's
// norm is the fp32 one to bf16 rounding.
TEST(TrainStepLossScaling, Bf16StepsWithoutScaling) {
  Config c = testing::tiny_mock_config();
  c.precision.dtype = "bf16";
  StepRig bf16(c), fp32(testing::tiny_mock_config());
  const StepResult r = bf16.step(0);
  const StepResult r32 = fp32.step(0, false);
  EXPECT_FALSE(bf16.scaler.enabled());
  EXPECT_FALSE(r.skipped);
  EXPECT_EQ(r.loss_scale, 1.0);
  EXPECT_EQ(bf16.optimizer.step_count(), 1);
  EXPECT_NEAR(r.grad_norm, r32.grad_norm, 5e-2 * r32.grad_norm);
}

// fp32 is bitwise what it was before mixed precision: a disabled scaler and the gradient sum
// change nothing.
TEST(TrainStepLossScaling, Fp32WithTheDisabledScalerIsBitwiseTheStepWithout) {
  Config c = testing::tiny_mock_config();
  StepRig a(c), b(c);
  for (int i = 0; i < 3; ++i) {
    const StepResult ra = a.step(i, /*with_scaler=*/true);
    const StepResult rb = b.step(i, /*with_scaler=*/false);
    EXPECT_EQ(ra.loss, rb.loss);
    EXPECT_EQ(ra.grad_norm, rb.grad_norm);
  }
  EXPECT_TRUE(a.state_bytes() == b.state_bytes());
}

}  // namespace
}  // namespace memtrain::train
