// BERT against PyTorch: tests/fixtures/make_bert_fixtures.py computes, in float64 from the same
// float32 weights, one encoder layer's output and gradients and the whole masked-LM model's
// loss, log-probabilities and every parameter gradient (Hugging Face semantics, dropout 0).
//
// Tolerances. The reference is exact to ~1e-15, so the differences are our float32 rounding
// (unit roundoff u = 6e-8) accumulated through ~20 dependent ops with sums of up to 64 terms
// and LayerNorm's 1/std amplification: observed errors are 1e-7..1e-6 of each tensor's scale
// (max |ref|). A bound of 2e-5 of the scale leaves a 20x margin for other BLAS kernels and
// thread counts, while any wrong formula (a missing term, a transposed weight, the tied decoder
// gradient not added, a wrong mask) moves results by 1e-2 or more of the scale.
#include <gtest/gtest.h>

#include <memory>

#include "models/bert_layer.hpp"
#include "runtime/core/tags.hpp"
#include "tests/models/bert_test_util.hpp"

namespace memtrain::models {
namespace {

using memtrain::testing::BertFixture;
using memtrain::testing::scaled_max_error;

constexpr double kScaledTolerance = 2e-5;

core::Tensor tensor_from(core::Context& ctx, const std::vector<double>& v, std::vector<std::int64_t> shape) {
  auto t = core::Tensor::empty(ctx, std::move(shape), core::DType::f32, core::tags().activation);
  for (std::size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = static_cast<float>(v[i]);
  return t;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The key bias adds q . b_k to every score of a row, which softmax ignores: its gradient is
// exactly 0 and the reference holds only rounding (~1e-17). It is checked against the scale of
// the same layer's query-bias gradient instead of its own.
void expect_gradient_matches(const Parameter& p, const BertFixture& f, const std::string& prefix) {
  const float* g = p.grad.data<float>();
  const std::string key_bias = "attention.self.key.bias";
  if (ends_with(p.name, key_bias)) {
    const std::string query_bias = p.name.substr(0, p.name.size() - key_bias.size()) + "attention.self.query.bias";
    double scale = 0.0, got = 0.0;
    for (double r : f.doubles(prefix + query_bias)) scale = std::max(scale, std::abs(r));
    for (std::int64_t i = 0; i < p.grad.numel(); ++i) got = std::max(got, double{std::abs(g[i])});
    EXPECT_LT(got, kScaledTolerance * scale) << p.name;
    return;
  }
  EXPECT_LT(scaled_max_error(g, f.doubles(prefix + p.name)), kScaledTolerance) << p.name;
}

TEST(BertLayerVsPyTorch, OutputInputGradientAndParameterGradientsMatch) {
  const auto& f = BertFixture::get();
  core::Context ctx(std::make_shared<memtrain::testing::TestAllocator>());
  ParameterSet params(ctx);
  BertLayer layer(params, 0, f.config);
  memtrain::testing::load_weights(params.parameters(), f);

  const int B = f.batch.batch_size, T = f.batch.seq_length, C = f.config.hidden_size;
  PassState s{ctx};
  s.B = B;
  s.T = T;
  s.attention_mask = f.batch.attention_mask.data();
  s.training = true;
  auto x = tensor_from(ctx, f.doubles("layer.input"), {B, T, C});
  auto dout = tensor_from(ctx, f.doubles("layer.dout"), {B, T, C});
  auto y = layer.forward(s, x);
  EXPECT_LT(scaled_max_error(y.data<float>(), f.doubles("layer.output")), kScaledTolerance);
  auto dx = layer.backward(s, dout);
  EXPECT_LT(scaled_max_error(dx.data<float>(), f.doubles("layer.grad.input")), kScaledTolerance);
  ASSERT_EQ(params.parameters().size(), 16u);
  for (const auto& p : params.parameters()) expect_gradient_matches(p, f, "layer.grad.");
}

class BertVsPyTorch : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_ = std::make_unique<core::Context>(std::make_shared<memtrain::testing::TestAllocator>());
    model_ = std::make_unique<BertForMaskedLM>(f_.config, *ctx_);
    memtrain::testing::load_weights(model_->parameters(), f_);
  }
  const BertFixture& f_ = BertFixture::get();
  std::unique_ptr<core::Context> ctx_;
  std::unique_ptr<BertForMaskedLM> model_;
};

TEST_F(BertVsPyTorch, ParameterNamesAndOrderAreHuggingFaces) {
  // Every parameter exists in the fixture (load_weights asserts that); check count and the
  // first and last names of Hugging Face's named_parameters() order.
  const auto& ps = model_->parameters();
  ASSERT_EQ(ps.size(), 5u + 16u * 2u + 5u);
  EXPECT_EQ(ps.front().name, "bert.embeddings.word_embeddings.weight");
  EXPECT_EQ(ps[5].name, "bert.encoder.layer.0.attention.self.query.weight");
  EXPECT_EQ(ps.back().name, "cls.predictions.bias");
}

TEST_F(BertVsPyTorch, LossAndEveryParameterGradientMatch) {
  const int M = static_cast<int>(f_.batch.masked_positions.size());
  StepStats st = model_->forward_backward(f_.batch, 1.0f / M, /*seed=*/1, /*step=*/1);
  const double ref_loss = f_.doubles("model.loss_sum")[0];
  EXPECT_NEAR(st.loss_sum, ref_loss, 1e-5 * std::abs(ref_loss));
  EXPECT_EQ(st.num_masked, M);
  EXPECT_EQ(st.num_correct, static_cast<std::int64_t>(f_.doubles("model.num_correct")[0]));
  for (const auto& p : model_->parameters()) {
    expect_gradient_matches(p, f_, "model.grad.");
  }
}

TEST_F(BertVsPyTorch, GradientsAccumulateAcrossCallsUntilZeroGrad) {
  const int M = static_cast<int>(f_.batch.masked_positions.size());
  model_->forward_backward(f_.batch, 1.0f / M, 1, 1);
  model_->forward_backward(f_.batch, 1.0f / M, 1, 1);
  const auto& word = model_->parameters().front();
  auto ref = f_.doubles("model.grad." + word.name);
  for (auto& r : ref) r *= 2.0;
  EXPECT_LT(scaled_max_error(word.grad.data<float>(), ref), kScaledTolerance);
  model_->zero_grad();
  for (const auto& p : model_->parameters()) {
    for (std::int64_t i = 0; i < p.grad.numel(); ++i) ASSERT_EQ(p.grad.data<float>()[i], 0.0f);
  }
}

TEST_F(BertVsPyTorch, EvaluateGivesTheReferenceLossWithoutTouchingGradients) {
  StepStats st = model_->evaluate(f_.batch);
  const double ref_loss = f_.doubles("model.loss_sum")[0];
  EXPECT_NEAR(st.loss_sum, ref_loss, 1e-5 * std::abs(ref_loss));
  EXPECT_EQ(st.num_correct, static_cast<std::int64_t>(f_.doubles("model.num_correct")[0]));
  for (const auto& p : model_->parameters()) {
    for (std::int64_t i = 0; i < p.grad.numel(); ++i) ASSERT_EQ(p.grad.data<float>()[i], 0.0f);
  }
}

TEST_F(BertVsPyTorch, PredictedLogProbabilitiesMatch) {
  auto lp = model_->predict_log_probs(f_.batch, f_.batch.masked_positions);
  const auto ref = f_.doubles("model.log_probs");
  ASSERT_EQ(lp.size(), ref.size());
  // log-probabilities are O(1..10) nats: an absolute bound of 1e-4 nats is 1e-5 relative.
  for (std::size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(lp[i], ref[i], 1e-4) << i;
}

}  // namespace
}  // namespace memtrain::models
