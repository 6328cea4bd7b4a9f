// AdamW on f32 master weights for 16-bit parameters (issue 5, mixed precision): the update runs
// on the master in f32 from the 16-bit gradient read as float, and the 16-bit value is the
// master rounded to nearest even. References: AdamW in double from the paper (as in
// optimizer_test.cpp), the IEEE binary16/bfloat16 roundings of kernels/cpu/half_convert (held
// to numpy/torch fixtures by its own tests), and exact powers-of-two arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/half_convert.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"
#include "runtime/train/model_memory.hpp"
#include "runtime/train/optimizer.hpp"

namespace memtrain::train {
namespace {

using kernels::HalfFormat;

std::uint16_t to_half(float x, HalfFormat f) {
  return f == HalfFormat::f16 ? kernels::float_to_f16(x) : kernels::float_to_bf16(x);
}
float from_half(std::uint16_t h, HalfFormat f) {
  return f == HalfFormat::f16 ? kernels::f16_to_float(h) : kernels::bf16_to_float(h);
}
core::DType dtype_of(HalfFormat f) { return f == HalfFormat::f16 ? core::DType::f16 : core::DType::bf16; }

// Parameters with a 16-bit value, a 16-bit (or f32) gradient and an f32 master.
struct HalfFixture {
  explicit HalfFixture(HalfFormat f, bool dry_run = false) : format(f) { ctx.set_dry_run(dry_run); }
  HalfFormat format;
  std::shared_ptr<memory::CachingAllocator> allocator = make_model_allocator(MemoryConfig{});
  core::Context ctx{allocator};
  std::vector<models::Parameter> params;

  void add(const std::string& name, const std::vector<float>& master, bool weight_decay, bool f32_grad = false) {
    const auto n = static_cast<std::int64_t>(master.size());
    models::Parameter p;
    p.name = name;
    p.value = core::Tensor::empty(ctx, {n}, dtype_of(format), core::tags().parameter);
    p.grad = core::Tensor::zeros(ctx, {n}, f32_grad ? core::DType::f32 : dtype_of(format), core::tags().gradient);
    p.master = core::Tensor::empty(ctx, {n}, core::DType::f32, core::tags().master_weight);
    p.weight_decay = weight_decay;
    if (!ctx.dry_run()) {
      std::copy(master.begin(), master.end(), p.master.data<float>());
      for (std::int64_t i = 0; i < n; ++i) p.value.data<std::uint16_t>()[i] = to_half(master[i], format);
    }
    params.push_back(std::move(p));
  }
  // Stores g (rounded to the gradient's dtype) and returns what was stored, as double.
  std::vector<double> set_grad(std::size_t i, const std::vector<float>& g) {
    std::vector<double> stored(g.size());
    auto& grad = params[i].grad;
    for (std::size_t j = 0; j < g.size(); ++j) {
      if (grad.dtype() == core::DType::f32) {
        grad.data<float>()[j] = g[j];
        stored[j] = g[j];
      } else {
        grad.data<std::uint16_t>()[j] = to_half(g[j], format);
        stored[j] = from_half(grad.data<std::uint16_t>()[j], format);
      }
    }
    return stored;
  }
};

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
      p[i] -= lr * (m[i] / (1 - std::pow(b1, t))) / (std::sqrt(v[i] / (1 - std::pow(b2, t))) + eps);
    }
  }
};

class EveryHalfFormat : public ::testing::TestWithParam<HalfFormat> {};

TEST_P(EveryHalfFormat, MasterFollowsAdamWInDoubleAndValueIsTheMasterRoundedToNearestEven) {
  HalfFixture f(GetParam());
  // 5000 elements: more than one chunk of the master update (4096).
  std::vector<float> w0(5000);
  for (std::size_t i = 0; i < w0.size(); ++i) w0[i] = 0.01f * static_cast<float>(static_cast<int>(i % 201) - 100);
  f.add("w", w0, /*weight_decay=*/true);
  AdamW adamw(f.params, f.ctx, AdamWOptions{0.9, 0.98, 1e-6, 0.1});
  ReferenceAdamW ref{
      0.9, 0.98, 1e-6, 0.1, {w0.begin(), w0.end()}, std::vector<double>(w0.size()), std::vector<double>(w0.size())};
  for (int s = 0; s < 3; ++s) {
    std::vector<float> g(w0.size());
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = std::sin(0.37f * static_cast<float>(i) + static_cast<float>(s));
    ref.step(f.set_grad(0, g), 1e-2);
    adamw.step(1e-2);
  }
  EXPECT_EQ(adamw.step_count(), 3);
  const float* master = f.params[0].master.data<float>();
  const std::uint16_t* value = f.params[0].value.data<std::uint16_t>();
  for (std::size_t i = 0; i < w0.size(); ++i) {
    ASSERT_NEAR(master[i], ref.p[i], 2e-6) << i;
    ASSERT_EQ(value[i], to_half(master[i], GetParam())) << i;
  }
}

// Scaling a gradient by 2^10 is exact in both formats for these magnitudes, and a multiplier of
// 2^-10 undoes it exactly in f32: the update must be bitwise the unscaled one. This is how the
// loss scale is removed (train_step folds 1/scale into grad_multiplier).
TEST_P(EveryHalfFormat, GradMultiplierUndoesAPowerOfTwoLossScaleBitwise) {
  const std::vector<float> w0 = {0.5f, -1.25f, 2.0f, 0.0f, 0.75f};
  const std::vector<float> g = {0.3f, -0.2f, 1e-3f, 0.7f, -0.05f};
  std::vector<float> g_scaled(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) g_scaled[i] = g[i] * 1024.0f;
  HalfFixture a(GetParam()), b(GetParam());
  a.add("w", w0, true);
  b.add("w", w0, true);
  AdamW oa(a.params, a.ctx, AdamWOptions{}), ob(b.params, b.ctx, AdamWOptions{});
  a.set_grad(0, g);
  b.set_grad(0, g_scaled);
  oa.step(1e-2);
  ob.step(1e-2, 1.0 / 1024.0);
  for (std::size_t i = 0; i < w0.size(); ++i) {
    EXPECT_EQ(a.params[0].master.data<float>()[i], b.params[0].master.data<float>()[i]) << i;
    EXPECT_EQ(a.params[0].value.data<std::uint16_t>()[i], b.params[0].value.data<std::uint16_t>()[i]) << i;
    EXPECT_EQ(oa.exp_avg_sq(0).data<float>()[i], ob.exp_avg_sq(0).data<float>()[i]) << i;
  }
}

TEST_P(EveryHalfFormat, GradNormReadsTheSixteenBitGradientsAsStored) {
  HalfFixture f(GetParam());
  f.add("a", std::vector<float>(3, 0.0f), true);
  f.add("b", std::vector<float>(2, 0.0f), false);
  const auto ga = f.set_grad(0, {3.0f, 0.1f, -0.3f});
  const auto gb = f.set_grad(1, {4.0f, 1e-3f});
  AdamW adamw(f.params, f.ctx, AdamWOptions{});
  double sum = 0;
  for (double x : ga) sum += x * x;
  for (double x : gb) sum += x * x;
  EXPECT_DOUBLE_EQ(adamw.grad_norm(), std::sqrt(sum));
}

TEST_P(EveryHalfFormat, InfOrNanInAnyGradientIsNotFinite) {
  HalfFixture f(GetParam());
  f.add("a", std::vector<float>(4, 0.0f), true);
  f.add("b", std::vector<float>(4, 0.0f), true, /*f32_grad=*/true);
  AdamW adamw(f.params, f.ctx, AdamWOptions{});
  EXPECT_TRUE(adamw.grads_finite());
  f.set_grad(0, {0.0f, std::numeric_limits<float>::infinity(), 0.0f, 0.0f});
  EXPECT_FALSE(adamw.grads_finite());
  f.set_grad(0, {0.0f, 0.0f, 0.0f, 0.0f});
  f.set_grad(1, {0.0f, 0.0f, std::nanf(""), 0.0f});
  EXPECT_FALSE(adamw.grads_finite());
  f.set_grad(1, {0.0f, 0.0f, 0.0f, 0.0f});
  EXPECT_TRUE(adamw.grads_finite());
}

// precision.fp32_grad_accumulation: f32 gradient, 16-bit value, f32 master.
TEST_P(EveryHalfFormat, Fp32GradientsUpdateTheMasterToo) {
  HalfFixture f(GetParam());
  const std::vector<float> w0 = {0.5f, -1.25f};
  f.add("w", w0, false, /*f32_grad=*/true);
  AdamW adamw(f.params, f.ctx, AdamWOptions{0.9, 0.999, 1e-8, 0.0});
  ReferenceAdamW ref{0.9, 0.999, 1e-8, 0.0, {w0.begin(), w0.end()}, {0, 0}, {0, 0}};
  ref.step(f.set_grad(0, {0.123456789f, -2.5f}), 1e-3);
  adamw.step(1e-3);
  for (int i = 0; i < 2; ++i) {
    EXPECT_NEAR(f.params[0].master.data<float>()[i], ref.p[i], 1e-6);
    EXPECT_EQ(f.params[0].value.data<std::uint16_t>()[i], to_half(f.params[0].master.data<float>()[i], GetParam()));
  }
}

INSTANTIATE_TEST_SUITE_P(AdamWOnMasters, EveryHalfFormat, ::testing::Values(HalfFormat::f16, HalfFormat::bf16),
                         [](const auto& info) { return info.param == HalfFormat::f16 ? "f16" : "bf16"; });

// Clipping in place would round 16-bit gradients a second time; it is refused with the way out.
TEST(AdamWOnMasters, InPlaceClippingOfSixteenBitGradientsIsRefused) {
  HalfFixture f(HalfFormat::bf16);
  f.add("w", {0.0f, 0.0f}, true);
  f.set_grad(0, {30.0f, 40.0f});
  AdamW adamw(f.params, f.ctx, AdamWOptions{});
  try {
    adamw.clip_grad_norm(1.0);
    FAIL() << "clipped 16-bit gradients in place";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("grad_multiplier"), std::string::npos) << e.what();
  }
  EXPECT_DOUBLE_EQ(adamw.clip_grad_norm(0.0), 50.0);  // measuring only is fine
}

// A dry run allocates the same moments and touches no tensor memory: the step only counts.
TEST(AdamWOnMasters, DryRunAllocatesTheSameMomentsAndDoesNoMath) {
  HalfFixture compute(HalfFormat::f16), dry(HalfFormat::f16, /*dry_run=*/true);
  compute.add("w", std::vector<float>(1000, 1.0f), true);
  dry.add("w", std::vector<float>(1000, 1.0f), true);
  AdamW a(compute.params, compute.ctx, AdamWOptions{});
  AdamW b(dry.params, dry.ctx, AdamWOptions{});
  EXPECT_EQ(compute.allocator->stats().allocated_bytes.current, dry.allocator->stats().allocated_bytes.current);
  EXPECT_EQ(b.grad_norm(), 0.0);
  EXPECT_TRUE(b.grads_finite());
  b.step(1e-2, 0.5);
  EXPECT_EQ(b.step_count(), 1);
  EXPECT_EQ(compute.allocator->stats().allocated_bytes.current, dry.allocator->stats().allocated_bytes.current);
}

}  // namespace
}  // namespace memtrain::train
