// BertForMaskedLM with 16-bit storage (ModelOptions::compute_dtype f16 / bf16) against the
// PyTorch float64 reference of tests/fixtures/bert_tiny.safetensors (make_bert_fixtures.py,
// computed from the same weights in float32): the same model, loss and gradients, up to the
// rounding that 16-bit storage adds.
//
// Tolerances from the formats' unit roundoff u (half an ulp at 1): f16 u = 2^-11 = 4.9e-4,
// bf16 u = 2^-8 = 3.9e-3. Every stored tensor (weights, each activation, each backward flow
// tensor, the 16-bit gradients) adds a relative error of at most u, and a gradient passes
// through about 2 layers x 2 passes x ~8 stored tensors; independent rounding errors add in
// quadrature, so sqrt(30) u ~ 5.5 u is typical, which is what we observe: at most 8.3 u of a
// gradient's scale (max |ref|), the loss within 0.09 u, 1 - cosine of all gradients 8.5 u^2.
// Bounds, with 4x to 11x margin: each gradient within 32 u of its scale, the loss within u
// relative (a sum over tokens averages rounding errors), cosine similarity above 1 - 64 u^2
// (0.99998 for f16, 0.999 for bf16). A wrong conversion (a missed write-back, a gradient not
// accumulated, a transposed copy) moves a gradient by a large fraction of its scale.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/half_convert.hpp"
#include "kernels/cpu/matmul_bf16.hpp"
#include "models/f32_access.hpp"
#include "models/parameter_io.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"
#include "tests/models/bert_test_util.hpp"

namespace memtrain::models {
namespace {

using core::DType;
using memtrain::testing::BertFixture;

double unit_roundoff(DType d) { return d == DType::f16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8); }

// The fixture's weights (only the arrays that name a parameter).
std::map<std::string, core::HostArray> fixture_weights(const std::vector<Parameter>& ps) {
  const auto& f = BertFixture::get();
  std::map<std::string, core::HostArray> w;
  for (const auto& p : ps) w.emplace(p.name, f.arrays.at(p.name));
  return w;
}

std::vector<float> grad_f32(const Parameter& p) {
  std::vector<float> g(static_cast<std::size_t>(p.grad.numel()));
  load_f32(g.data(), p.grad);
  return g;
}

struct StepResult {
  double loss = 0.0;
  std::map<std::string, std::vector<float>> grads;  // unscaled, f32
};

// One forward_backward of the fixture batch. loss_scale multiplies the loss gradient (as the
// trainer's dynamic loss scaling does for fp16) and is divided out of the returned gradients;
// so is `share`, the fraction of a larger global batch's masked tokens this batch holds (the
// trainer's grad_scale is 1 / masked tokens of the global batch).
StepResult run_fixture(ModelOptions options, double loss_scale, double share = 1.0) {
  const auto& f = BertFixture::get();
  core::Context ctx(std::make_shared<memtrain::testing::TestAllocator>());
  BertForMaskedLM model(f.config, ctx, options);
  load_parameters(model.parameters(), fixture_weights(model.parameters()), "the fixture");
  const int M = static_cast<int>(f.batch.masked_positions.size());
  const auto st = model.forward_backward(f.batch, static_cast<float>(loss_scale * share / M),
                                         /*seed=*/1, /*step=*/1);
  EXPECT_EQ(ctx.workspace().slots_in_use(), 0) << "a float view was not returned";
  StepResult r;
  r.loss = st.loss_sum;
  for (const auto& p : model.parameters()) {
    auto g = grad_f32(p);
    for (auto& x : g) x = static_cast<float>(x / loss_scale / share);
    r.grads[p.name] = std::move(g);
  }
  return r;
}

struct Case {
  DType dtype;
  bool fp32_grad_accumulation;
  double loss_scale;
  bool native_bf16_gemm = false;  // oneDNN's bf16 GEMMs (Note [bf16 GEMMs through oneDNN])
};

class SixteenBit : public ::testing::TestWithParam<Case> {};

TEST_P(SixteenBit, LossAndGradientsMatchTheFloat64ReferenceWithinRounding) {
  const Case c = GetParam();
  if (c.native_bf16_gemm && !kernels::bf16_gemm_native()) {
    GTEST_SKIP() << "this CPU has no bf16 dot products (" << kernels::bf16_gemm_description() << ")";
  }
  const double u = unit_roundoff(c.dtype);
  ModelOptions o;
  o.compute_dtype = c.dtype;
  o.fp32_grad_accumulation = c.fp32_grad_accumulation;
  o.native_bf16_gemm = c.native_bf16_gemm;
  const StepResult r = run_fixture(o, c.loss_scale);
  const auto& f = BertFixture::get();

  const double ref_loss = f.doubles("model.loss_sum")[0];
  EXPECT_NEAR(r.loss, ref_loss, u * std::abs(ref_loss));

  double dot = 0.0, n_got = 0.0, n_ref = 0.0;
  for (const auto& [name, g] : r.grads) {
    const auto ref = f.doubles("model.grad." + name);
    double scale = 0.0, err = 0.0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      scale = std::max(scale, std::abs(ref[i]));
      err = std::max(err, std::abs(g[i] - ref[i]));
      dot += g[i] * ref[i];
      n_got += double{g[i]} * g[i];
      n_ref += ref[i] * ref[i];
    }
    // The key bias's gradient is exactly 0 in exact arithmetic (softmax ignores a per-row
    // constant); only rounding is left, so it is held to the query bias's scale.
    if (name.find("attention.self.key.bias") != std::string::npos) {
      const std::string q = name.substr(0, name.find("key.bias")) + "query.bias";
      scale = 0.0;
      for (double x : f.doubles("model.grad." + q)) scale = std::max(scale, std::abs(x));
    }
    EXPECT_LT(err, 32 * u * scale) << name << " max error " << err << " of scale " << scale;
  }
  const double cosine = dot / std::sqrt(n_got * n_ref);
  EXPECT_GT(cosine, 1.0 - 64 * u * u) << "cosine similarity of all gradients";
}

INSTANTIATE_TEST_SUITE_P(Dtypes, SixteenBit,
                         ::testing::Values(Case{DType::f16, false, 1024.0}, Case{DType::f16, true, 1024.0},
                                           Case{DType::bf16, false, 1.0}, Case{DType::bf16, true, 1.0},
                                           Case{DType::bf16, false, 1.0, true}, Case{DType::bf16, true, 1.0, true}),
                         [](const auto& info) {
                           return core::dtype_name(info.param.dtype) +
                                  (info.param.fp32_grad_accumulation ? "_fp32_grads" : "_16bit_grads") +
                                  (info.param.native_bf16_gemm ? "_bf16_gemm" : "");
                         });

// PassState::grads_zero: after zero_grad the first backward writes each layer's 16-bit weight
// gradient through a zeroed float view instead of converting the zeros in. It must give the
// bits the read_write path gives (a model never zeroed, whose gradients start at zero too), and
// the next micro-batch must add to it, not overwrite it: a flag left set would leave the second
// micro-batch's gradients equal to the first's.
// With bf16 GEMMs the first backward asks oneDNN to write the weight gradients, the next to add.
TEST(SixteenBitGradients, TheFirstBackwardAfterZeroGradWritesAndTheNextOneAdds) {
  for (const auto& [d, native] :
       {std::pair{DType::bf16, false}, std::pair{DType::f16, false}, std::pair{DType::bf16, true}}) {
    if (native && !kernels::bf16_gemm_native()) continue;
    SCOPED_TRACE(native ? "bf16 GEMMs" : "GEMMs on float views");
    const auto& f = BertFixture::get();
    ModelOptions o;
    o.compute_dtype = d;
    o.native_bf16_gemm = native;
    const float scale = d == DType::f16 ? 1024.0f : 1.0f;
    const int M = static_cast<int>(f.batch.masked_positions.size());
    core::Context ctx_a(std::make_shared<memtrain::testing::TestAllocator>());
    core::Context ctx_b(std::make_shared<memtrain::testing::TestAllocator>());
    BertForMaskedLM zeroed(f.config, ctx_a, o), fresh(f.config, ctx_b, o);
    load_parameters(zeroed.parameters(), fixture_weights(zeroed.parameters()), "the fixture");
    load_parameters(fresh.parameters(), fixture_weights(fresh.parameters()), "the fixture");
    zeroed.zero_grad();
    zeroed.forward_backward(f.batch, scale / M, 1, 1);
    fresh.forward_backward(f.batch, scale / M, 1, 1);
    std::map<std::string, std::vector<float>> first;
    for (std::size_t i = 0; i < zeroed.parameters().size(); ++i) {
      const auto& p = zeroed.parameters()[i];
      first[p.name] = grad_f32(p);
      EXPECT_EQ(first[p.name], grad_f32(fresh.parameters()[i])) << core::dtype_name(d) << " " << p.name;
    }
    zeroed.forward_backward(f.batch, scale / M, 1, 1);  // a second micro-batch: adds
    const double u = unit_roundoff(d);
    for (const auto& p : zeroed.parameters()) {
      const auto twice = grad_f32(p);
      const auto& once = first[p.name];
      double scale_once = 0.0, err = 0.0;
      for (std::size_t i = 0; i < once.size(); ++i) {
        scale_once = std::max(scale_once, std::abs(double{once[i]}));
        err = std::max(err, std::abs(double{twice[i]} - 2.0 * once[i]));
      }
      EXPECT_LE(err, 4 * u * 2 * scale_once) << core::dtype_name(d) << " " << p.name;
    }
    EXPECT_EQ(ctx_a.workspace().slots_in_use(), 0);
  }
}

// The largest error of any gradient relative to its scale (max |ref|), key biases excepted
// (their exact gradient is 0).
double worst_gradient_error(const StepResult& r) {
  const auto& f = BertFixture::get();
  double worst = 0.0;
  for (const auto& [name, g] : r.grads) {
    if (name.find("attention.self.key.bias") != std::string::npos) continue;
    const auto ref = f.doubles("model.grad." + name);
    double scale = 0.0, err = 0.0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      scale = std::max(scale, std::abs(ref[i]));
      err = std::max(err, std::abs(g[i] - ref[i]));
    }
    worst = std::max(worst, err / scale);
  }
  return worst;
}

// In a global batch of 2^20 times the fixture's masked tokens (BERT-Large pre-training has
// ~5e6), gradients shrink by 2^-20 and fall below f16's smallest subnormal 2^-24 = 6e-8: they
// flush to zero or keep few bits, the reason for loss scaling (Micikevicius et al. 2018, sec.
// 3.2). Scaling the loss by 2^20 restores them; bf16 has float's exponent range and needs none.
TEST(SixteenBitStorage, Fp16GradientsOfALargeBatchNeedLossScalingAndBf16DoNot) {
  const double share = std::ldexp(1.0, -20);
  ModelOptions f16, bf16;
  f16.compute_dtype = DType::f16;
  bf16.compute_dtype = DType::bf16;
  EXPECT_GT(worst_gradient_error(run_fixture(f16, 1.0, share)), 0.25);
  EXPECT_LT(worst_gradient_error(run_fixture(f16, std::ldexp(1.0, 20), share)), 32 * unit_roundoff(DType::f16));
  EXPECT_LT(worst_gradient_error(run_fixture(bf16, 1.0, share)), 32 * unit_roundoff(DType::bf16));
}

// evaluate and predict_log_probs read 16-bit logits through float views: same loss and
// log-probabilities as the reference, within the bounds of the file comment.
TEST(SixteenBitStorage, EvaluateAndPredictLogProbsReadSixteenBitLogits) {
  const auto& f = BertFixture::get();
  core::Context ctx(std::make_shared<memtrain::testing::TestAllocator>());
  ModelOptions o;
  o.compute_dtype = DType::bf16;
  BertForMaskedLM model(f.config, ctx, o);
  load_parameters(model.parameters(), fixture_weights(model.parameters()), "the fixture");
  const double u = unit_roundoff(DType::bf16);
  const double ref_loss = f.doubles("model.loss_sum")[0];
  EXPECT_NEAR(model.evaluate(f.batch).loss_sum, ref_loss, u * std::abs(ref_loss));
  const auto lp = model.predict_log_probs(f.batch, f.batch.masked_positions);
  EXPECT_LT(memtrain::testing::scaled_max_error(lp.data(), f.doubles("model.log_probs")), 32 * u);
  EXPECT_EQ(ctx.workspace().slots_in_use(), 0);
}

TEST(SixteenBitStorage, InitWritesTheFloatDrawToTheMasterAndItsRoundingToTheValue) {
  core::Context ctx(std::make_shared<memtrain::testing::TestAllocator>());
  const auto& f = BertFixture::get();
  BertForMaskedLM fp32(f.config, ctx);
  ModelOptions o;
  o.compute_dtype = DType::bf16;
  BertForMaskedLM bf16(f.config, ctx, o);
  fp32.init_parameters(42);
  bf16.init_parameters(42);
  for (std::size_t i = 0; i < fp32.parameters().size(); ++i) {
    const auto& a = fp32.parameters()[i];
    const auto& b = bf16.parameters()[i];
    ASSERT_FALSE(a.master.defined()) << "fp32 weights are their own master";
    ASSERT_EQ(b.master.dtype(), DType::f32);
    ASSERT_EQ(b.value.dtype(), DType::bf16);
    const float* x = a.value.data<float>();
    const float* m = b.master.data<float>();
    const std::uint16_t* v = b.value.data<std::uint16_t>();
    for (std::int64_t j = 0; j < a.value.numel(); ++j) {
      ASSERT_EQ(m[j], x[j]) << b.name << "[" << j << "]";
      ASSERT_EQ(v[j], kernels::float_to_bf16(x[j])) << b.name << "[" << j << "]";
    }
  }
}

TEST(SixteenBitStorage, SavedParametersAreTheMastersAndLoadRestoresMasterAndValue) {
  core::Context ctx(std::make_shared<memtrain::testing::TestAllocator>());
  const auto& f = BertFixture::get();
  ModelOptions o;
  o.compute_dtype = DType::f16;
  BertForMaskedLM a(f.config, ctx, o), b(f.config, ctx, o);
  a.init_parameters(3);
  const auto arrays = parameters_to_arrays(a.parameters());
  for (const auto& p : a.parameters()) {
    ASSERT_EQ(arrays.at(p.name).dtype, "F32");
    const auto saved = core::to_floats(arrays.at(p.name));
    for (std::int64_t j = 0; j < p.master.numel(); ++j) {
      ASSERT_EQ(saved[j], p.master.data<float>()[j]) << p.name;
    }
  }
  load_parameters(b.parameters(), arrays, "memory");
  for (std::size_t i = 0; i < a.parameters().size(); ++i) {
    const auto& pa = a.parameters()[i];
    const auto& pb = b.parameters()[i];
    for (std::int64_t j = 0; j < pa.value.numel(); ++j) {
      ASSERT_EQ(pb.master.data<float>()[j], pa.master.data<float>()[j]);
      ASSERT_EQ(pb.value.data<std::uint16_t>()[j], pa.value.data<std::uint16_t>()[j]);
    }
  }
}

TEST(SixteenBitStorage, FloatStepUsesNoWorkspaceAndSixteenBitStepDoes) {
  const auto& f = BertFixture::get();
  for (DType d : {DType::f32, DType::bf16}) {
    core::Context ctx(std::make_shared<memtrain::testing::TestAllocator>());
    ModelOptions o;
    o.compute_dtype = d;
    BertForMaskedLM model(f.config, ctx, o);
    model.init_parameters(1);
    model.forward_backward(f.batch, 0.1f, 1, 1);
    if (d == DType::f32) {
      EXPECT_EQ(ctx.workspace().reserved_bytes(), 0u);
    } else {
      EXPECT_GT(ctx.workspace().reserved_bytes(), 0u);
    }
  }
}

TEST(SixteenBitStorage, IntegerComputeDtypeIsAConfigError) {
  core::Context ctx(std::make_shared<memtrain::testing::TestAllocator>());
  ModelOptions o;
  o.compute_dtype = DType::i32;
  try {
    BertForMaskedLM model(BertFixture::get().config, ctx, o);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("compute_dtype = I32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace memtrain::models
