// OneBitAdam on one rank (no compression: the momentum "sum" over one rank is the share
// itself). References: AdamW, bit for bit, before the freeze; after it the frozen-variance
// update written in double from Note [1-bit Adam sums the momentum] (Tang et al. 2021,
// Algorithm 1); a parameter with a zero gradient keeps its momentum and value.
#include "runtime/train/onebit_adam.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "comms/single_rank_communicator.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"
#include "runtime/train/model_memory.hpp"

namespace memtrain::train {
namespace {

OneBitAdamOptions freeze_at(std::int64_t step) {
  OneBitAdamOptions o;
  o.freeze_step = step;
  return o;
}

// Two parameters whose gradients live in one bucket, as a model's do.
struct Rig {
  std::shared_ptr<memory::CachingAllocator> allocator = make_model_allocator(MemoryConfig{});
  core::Context ctx{allocator};
  std::vector<comms::GradientBucket> buckets;
  std::vector<models::Parameter> params;
  comms::SingleRankCommunicator one;
  std::unique_ptr<comms::GradientSynchronizer> sync;

  Rig() {
    buckets =
        comms::make_gradient_buckets(ctx, {{0, "w", {3, 4}}, {1, "b", {5}}}, core::DType::f32, std::int64_t{1} << 30);
    const std::vector<std::vector<std::int64_t>> shapes = {{3, 4}, {5}};
    for (std::size_t i = 0; i < 2; ++i) {
      models::Parameter p{i == 0 ? "w" : "b",
                          core::Tensor::empty(ctx, shapes[i], core::DType::f32, core::tags().parameter),
                          core::Tensor::unbound(shapes[i], core::DType::f32),
                          i == 0,
                          core::Tensor{},
                          {}};
      for (const auto& e : buckets[0].entries) {
        if (e.key == i) p.grad.bind(buckets[0].buffer, e.offset);
      }
      for (std::int64_t j = 0; j < p.value.numel(); ++j)
        p.value.data<float>()[j] = 0.1f * static_cast<float>(j + 1) - 0.3f;
      params.push_back(std::move(p));
    }
    sync = std::make_unique<comms::GradientSynchronizer>(buckets, one, ctx, false);
  }
  void set_grads(int step, bool zero_bias) {
    for (std::size_t i = 0; i < 2; ++i) {
      float* g = params[i].grad.data<float>();
      for (std::int64_t j = 0; j < params[i].grad.numel(); ++j) {
        g[j] = zero_bias && i == 1 ? 0.0f : std::sin(0.7f * static_cast<float>(j + 3 * step + 1)) * 1e-2f;
      }
    }
  }
};

std::vector<float> copy(const core::Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

TEST(OneBitAdam, BeforeTheFreezeItIsAdamWBitForBit) {
  Rig a, b;
  const AdamWOptions o{0.9, 0.98, 1e-8, 0.01};
  OneBitAdam onebit(a.params, a.buckets, *a.sync, a.one, a.ctx, o, freeze_at(5));
  AdamW adamw(b.params, b.ctx, o);
  for (int s = 0; s < 5; ++s) {
    a.set_grads(s, false);
    b.set_grads(s, false);
    EXPECT_EQ(onebit.clip_grad_norm(1.0), adamw.clip_grad_norm(1.0));
    onebit.step(1e-2);
    adamw.step(1e-2);
    EXPECT_FALSE(onebit.step_comm()->bytes);  // one rank sends nothing
  }
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(copy(a.params[i].value), copy(b.params[i].value)) << a.params[i].name;
    EXPECT_EQ(copy(onebit.exp_avg(i)), copy(adamw.exp_avg(i)));
    EXPECT_EQ(copy(onebit.exp_avg_sq(i)), copy(adamw.exp_avg_sq(i)));
  }
}

// After the freeze: v stays, m follows the gradient, the update divides by the frozen v with the
// freeze step's bias correction; the bias's zero gradient leaves its m and value as they were.
TEST(OneBitAdam, AfterTheFreezeTheVarianceStaysAndZeroGradientsLeaveTheMomentum) {
  Rig a;
  const AdamWOptions o{0.9, 0.98, 1e-8, 0.01};
  const int freeze = 3;
  OneBitAdam opt(a.params, a.buckets, *a.sync, a.one, a.ctx, o, freeze_at(freeze));
  for (int s = 0; s < freeze; ++s) {
    a.set_grads(s, false);
    opt.step(1e-2);
  }
  EXPECT_TRUE(opt.frozen());
  std::vector<std::vector<double>> m(2), v(2), p(2);
  for (std::size_t i = 0; i < 2; ++i) {
    for (float x : copy(opt.exp_avg(i))) m[i].push_back(x);
    for (float x : copy(opt.exp_avg_sq(i))) v[i].push_back(x);
    for (float x : copy(a.params[i].value)) p[i].push_back(x);
  }
  const auto v_frozen = copy(opt.exp_avg_sq(0));
  const auto bias_m = copy(opt.exp_avg(1));
  const auto bias_value = copy(a.params[1].value);
  for (int s = freeze; s < freeze + 4; ++s) {
    a.set_grads(s, true);
    EXPECT_GT(opt.clip_grad_norm(0.0), 0.0);  // measures only: one rank's norm is exact
    const int t = s + 1;
    const double lr = 1e-2;
    for (std::size_t j = 0; j < m[0].size(); ++j) {
      const double g = a.params[0].grad.data<float>()[j];
      m[0][j] = 0.9 * m[0][j] + 0.1 * g;
      const double vhat = v[0][j] / (1 - std::pow(0.98, freeze));
      p[0][j] = p[0][j] * (1 - lr * 0.01) - lr * (m[0][j] / (1 - std::pow(0.9, t))) / (std::sqrt(vhat) + 1e-8);
    }
    opt.step(lr);
  }
  EXPECT_EQ(copy(opt.exp_avg_sq(0)), v_frozen);
  EXPECT_EQ(copy(opt.exp_avg(1)), bias_m);
  EXPECT_EQ(copy(a.params[1].value), bias_value);
  for (std::size_t j = 0; j < m[0].size(); ++j) {
    EXPECT_NEAR(opt.exp_avg(0).data<float>()[j], m[0][j], 1e-6 * std::abs(m[0][j]) + 1e-12) << j;
    EXPECT_NEAR(a.params[0].value.data<float>()[j], p[0][j], 1e-5 * std::abs(p[0][j]) + 1e-7) << j;
  }
}

TEST(OneBitAdam, SixteenBitParametersAndAZeroFreezeStepAreErrors) {
  Rig a;
  EXPECT_THROW(OneBitAdam(a.params, a.buckets, *a.sync, a.one, a.ctx, AdamWOptions{}, freeze_at(0)), RuntimeError);
  a.params[1].value = core::Tensor::empty(a.ctx, {5}, core::DType::bf16, core::tags().parameter);
  EXPECT_THROW(OneBitAdam(a.params, a.buckets, *a.sync, a.one, a.ctx, AdamWOptions{}, freeze_at(2)), RuntimeError);
}

}  // namespace
}  // namespace memtrain::train
