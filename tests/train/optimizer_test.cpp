#include "runtime/train/optimizer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/core/tags.hpp"
#include "runtime/train/model_memory.hpp"

namespace memtrain::train {
namespace {

struct Fixture {
  std::shared_ptr<memory::CachingAllocator> allocator = make_model_allocator(MemoryConfig{});
  core::Context ctx{allocator};
  std::vector<models::Parameter> params;

  void add(const std::string& name, const std::vector<float>& value, bool weight_decay) {
    const auto n = static_cast<std::int64_t>(value.size());
    models::Parameter p{name,
                        core::Tensor::empty(ctx, {n}, core::DType::f32, core::tags().parameter),
                        core::Tensor::zeros(ctx, {n}, core::DType::f32, core::tags().gradient),
                        weight_decay,
                        core::Tensor(),
                        models::ShardSpec{}};
    std::copy(value.begin(), value.end(), p.value.data<float>());
    params.push_back(std::move(p));
  }
  void set_grad(std::size_t i, const std::vector<double>& g) {
    for (std::size_t j = 0; j < g.size(); ++j) params[i].grad.data<float>()[j] = static_cast<float>(g[j]);
  }
};

// AdamW in double, written from Loshchilov & Hutter 2019 (Algorithm 2) with torch.optim.AdamW's
// placement of the decay (p -= lr * wd * p before the Adam update) and bias correction.
struct ReferenceAdamW {
  double b1, b2, eps, wd;
  std::vector<double> p, m, v;
  int t = 0;
  void step(const std::vector<double>& g, double lr) {
    ++t;
    for (std::size_t i = 0; i < p.size(); ++i) {
      p[i] -= lr * wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      const double mhat = m[i] / (1 - std::pow(b1, t));
      const double vhat = v[i] / (1 - std::pow(b2, t));
      p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
};

TEST(AdamW, ThreeStepsMatchTheClosedFormInDouble) {
  Fixture f;
  const std::vector<float> w0 = {0.5f, -1.25f, 2.0f, 0.0f};
  const std::vector<float> b0 = {0.1f, -0.3f};
  f.add("dense.weight", w0, /*weight_decay=*/true);
  f.add("dense.bias", b0, /*weight_decay=*/false);
  AdamWOptions opt{0.9, 0.98, 1e-6, 0.1};
  AdamW adamw(f.params, f.ctx, opt);

  ReferenceAdamW rw{0.9, 0.98, 1e-6, 0.1, {w0.begin(), w0.end()}, std::vector<double>(4), std::vector<double>(4)};
  ReferenceAdamW rb{0.9, 0.98, 1e-6, 0.0, {b0.begin(), b0.end()}, std::vector<double>(2), std::vector<double>(2)};
  const std::vector<std::vector<double>> gw = {
      {0.3, -0.2, 1e-3, 0.7}, {-0.1, 0.4, 2e-3, 0.0}, {0.25, 0.05, -1e-3, -0.5}};
  const std::vector<std::vector<double>> gb = {{1.0, -2.0}, {0.5, 0.5}, {-0.75, 1.5}};
  const double lrs[] = {1e-2, 5e-3, 2e-2};
  for (int s = 0; s < 3; ++s) {
    f.set_grad(0, gw[s]);
    f.set_grad(1, gb[s]);
    adamw.step(lrs[s]);
    rw.step(gw[s], lrs[s]);
    rb.step(gb[s], lrs[s]);
  }
  EXPECT_EQ(adamw.step_count(), 3);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f.params[0].value.data<float>()[i], rw.p[i], 2e-6) << i;
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(f.params[1].value.data<float>()[i], rb.p[i], 2e-6) << i;
}

TEST(AdamW, MomentsAreTaggedOptimizerState) {
  Fixture f;
  f.add("w", std::vector<float>(1000, 1.0f), true);
  const auto before = f.allocator->stats().per_tag[core::tags().optimizer_state].allocated_bytes.current;
  AdamW adamw(f.params, f.ctx, AdamWOptions{});
  const auto after = f.allocator->stats().per_tag[core::tags().optimizer_state].allocated_bytes.current;
  EXPECT_GE(after - before, 2 * 1000 * 4);  // m and v, fp32
}

// torch.nn.utils.clip_grad_norm_: total norm over all gradients; scale max_norm / (norm + 1e-6).
TEST(AdamW, ClippingScalesAllGradientsToTheMaxGlobalNorm) {
  Fixture f;
  f.add("a", {0, 0}, true);
  f.add("b", {0}, false);
  f.set_grad(0, {3.0, 0.0});
  f.set_grad(1, {4.0});  // global norm 5
  AdamW adamw(f.params, f.ctx, AdamWOptions{});
  EXPECT_NEAR(adamw.clip_grad_norm(1.0), 5.0, 1e-6);
  const double s = 1.0 / (5.0 + 1e-6);
  EXPECT_NEAR(f.params[0].grad.data<float>()[0], 3.0 * s, 1e-6);
  EXPECT_NEAR(f.params[1].grad.data<float>()[0], 4.0 * s, 1e-6);
  EXPECT_NEAR(adamw.grad_norm(), 1.0, 1e-5);
}

TEST(AdamW, GradientsBelowTheMaxNormAreUntouched) {
  Fixture f;
  f.add("a", {0, 0}, true);
  f.set_grad(0, {0.3, 0.4});
  AdamW adamw(f.params, f.ctx, AdamWOptions{});
  EXPECT_NEAR(adamw.clip_grad_norm(1.0), 0.5, 1e-7);
  EXPECT_FLOAT_EQ(f.params[0].grad.data<float>()[0], 0.3f);
  EXPECT_FLOAT_EQ(f.params[0].grad.data<float>()[1], 0.4f);
}

TEST(AdamW, ZeroMaxNormOnlyMeasures) {
  Fixture f;
  f.add("a", {0, 0}, true);
  f.set_grad(0, {30.0, 40.0});
  AdamW adamw(f.params, f.ctx, AdamWOptions{});
  EXPECT_NEAR(adamw.clip_grad_norm(0.0), 50.0, 1e-5);
  EXPECT_FLOAT_EQ(f.params[0].grad.data<float>()[1], 40.0f);
}

}  // namespace
}  // namespace memtrain::train
