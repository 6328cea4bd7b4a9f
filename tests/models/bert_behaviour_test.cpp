// Properties of BertForMaskedLM that need no PyTorch: batch-split invariance, dropout keying,
// parameter count and initialisation statistics, memory accounting, bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "models/bert_for_masked_lm.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"
#include "tests/models/bert_test_util.hpp"

namespace memtrain::models {
namespace {

using memtrain::testing::TestAllocator;

BertConfig tiny_config(float dropout = 0.1f) {
  BertConfig c;
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.intermediate_size = 64;
  c.max_position_embeddings = 16;
  c.hidden_dropout_prob = dropout;
  c.attention_probs_dropout_prob = dropout;
  c.initializer_range = 0.2f;  // larger than BERT's 0.02 so every path carries signal
  return c;
}

struct Model {
  explicit Model(const BertConfig& c, std::uint64_t seed = 7, bool dry_run = false)
      : alloc(std::make_shared<TestAllocator>(/*backs_memory=*/!dry_run)),
        ctx(make_context(alloc, dry_run)),
        model(c, ctx) {
    model.init_parameters(seed);
  }
  static core::Context make_context(std::shared_ptr<TestAllocator> a, bool dry_run) {
    core::Context ctx(std::move(a));
    ctx.set_dry_run(dry_run);
    return ctx;
  }
  std::shared_ptr<TestAllocator> alloc;
  core::Context ctx;
  BertForMaskedLM model;
};

double max_abs_diff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double d = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    for (std::size_t j = 0; j < a[i].size(); ++j) {
      d = std::max(d, double{std::abs(a[i][j] - b[i][j])});
    }
  }
  return d;
}

double max_abs(const std::vector<std::vector<float>>& a) {
  double m = 0.0;
  for (const auto& v : a)
    for (float x : v) m = std::max(m, double{std::abs(x)});
  return m;
}

// Design.md: an update never depends on how the global batch is split. One micro-batch of 4
// and two of 2 (grad_scale = 1 / masked tokens of all 4, dropout on) must give the same
// gradients up to float32 summation order (~1e-6 of the gradient scale).
TEST(BertForMaskedLM, GradientsDoNotDependOnTheMicroBatchSplit) {
  const BertConfig c = tiny_config(0.1f);
  const auto global = memtrain::testing::synthetic_batch(4, 12, c.vocab_size, /*first_sample=*/40);
  const float scale = 1.0f / static_cast<float>(global.masked_positions.size());

  Model one(c);
  StepStats s1 = one.model.forward_backward(global, scale, /*seed=*/3, /*step=*/5);
  Model two(c);
  StepStats s2a = two.model.forward_backward(memtrain::testing::slice_rows(global, 0, 2), scale, 3, 5);
  StepStats s2b = two.model.forward_backward(memtrain::testing::slice_rows(global, 2, 2), scale, 3, 5);

  EXPECT_EQ(s1.num_masked, s2a.num_masked + s2b.num_masked);
  EXPECT_EQ(s1.num_correct, s2a.num_correct + s2b.num_correct);
  EXPECT_NEAR(s1.loss_sum, s2a.loss_sum + s2b.loss_sum, 1e-5 * s1.loss_sum);
  const auto g1 = memtrain::testing::copy_grads(one.model.parameters());
  const auto g2 = memtrain::testing::copy_grads(two.model.parameters());
  EXPECT_LT(max_abs_diff(g1, g2), 1e-5 * max_abs(g1));
}

TEST(BertForMaskedLM, SameDropoutKeyGivesBitwiseIdenticalGradients) {
  const BertConfig c = tiny_config(0.1f);
  const auto batch = memtrain::testing::synthetic_batch(2, 12, c.vocab_size, 0);
  Model a(c), b(c);
  a.model.forward_backward(batch, 0.1f, 11, 2);
  b.model.forward_backward(batch, 0.1f, 11, 2);
  EXPECT_EQ(memtrain::testing::copy_grads(a.model.parameters()), memtrain::testing::copy_grads(b.model.parameters()));
}

// A different step (or seed) draws different masks: with p = 0.1 over thousands of elements the
// gradients move by a large fraction of their scale; without dropout they would be identical.
TEST(BertForMaskedLM, DifferentStepOrSeedGivesDifferentDropoutMasks) {
  const BertConfig c = tiny_config(0.1f);
  const auto batch = memtrain::testing::synthetic_batch(2, 12, c.vocab_size, 0);
  Model base(c), other_step(c), other_seed(c);
  base.model.forward_backward(batch, 0.1f, 11, 2);
  other_step.model.forward_backward(batch, 0.1f, 11, 3);
  other_seed.model.forward_backward(batch, 0.1f, 12, 2);
  const auto g = memtrain::testing::copy_grads(base.model.parameters());
  EXPECT_GT(max_abs_diff(g, memtrain::testing::copy_grads(other_step.model.parameters())), 1e-2 * max_abs(g));
  EXPECT_GT(max_abs_diff(g, memtrain::testing::copy_grads(other_seed.model.parameters())), 1e-2 * max_abs(g));

  // With dropout 0 the step is irrelevant.
  const BertConfig c0 = tiny_config(0.0f);
  Model p(c0), q(c0);
  p.model.forward_backward(batch, 0.1f, 11, 2);
  q.model.forward_backward(batch, 0.1f, 11, 3);
  EXPECT_EQ(memtrain::testing::copy_grads(p.model.parameters()), memtrain::testing::copy_grads(q.model.parameters()));
}

// Closed form for BERT with a tied decoder: embeddings V C + P C + TV C + 2 C; per layer
// 4 (C^2 + C) + 2 C + (C I + I) + (I C + C) + 2 C; head (C^2 + C) + 2 C + V. For bert-base
// (V 30522, C 768, I 3072, L 12, P 512) this is 109,514,298, the count Hugging Face reports for
// bert-base-uncased's BertForMaskedLM. Built in a dry run: the 440 MB are never touched.
std::int64_t closed_form_parameters(const BertConfig& c) {
  const std::int64_t V = c.vocab_size, C = c.hidden_size, I = c.intermediate_size, P = c.max_position_embeddings,
                     TV = c.type_vocab_size, L = c.num_hidden_layers;
  const std::int64_t layer = 4 * (C * C + C) + 2 * C + (C * I + I) + (I * C + C) + 2 * C;
  return V * C + P * C + TV * C + 2 * C + L * layer + (C * C + C) + 2 * C + V;
}

TEST(BertForMaskedLM, NumParametersMatchesTheClosedFormAndBertBase) {
  BertConfig base;  // Hugging Face defaults = bert-base-uncased
  Model m(base, 0, /*dry_run=*/true);
  EXPECT_EQ(closed_form_parameters(base), 109'514'298);
  EXPECT_EQ(m.model.num_parameters(), 109'514'298);
  // Parameters and gradients are both allocated: 2 x 4 bytes per parameter.
  EXPECT_EQ(m.alloc->live_bytes(core::tags().parameter), 4 * 109'514'298LL);
  EXPECT_EQ(m.alloc->live_bytes(core::tags().gradient), 4 * 109'514'298LL);

  const BertConfig c = tiny_config();
  Model t(c);
  EXPECT_EQ(t.model.num_parameters(), closed_form_parameters(c));
}

// Narayanan et al. 2021 (Megatron-LM, eq. 3) count 72 B s l h^2 (1 + s / (6 h) + V / (12 l h))
// training FLOPs for a transformer with FFN 4h and logits at every position. Per token, with
// the head on every position (masked_fraction 1), ours must equal that plus the MLM head's
// transform dense (h x h, forward + backward: 6 h^2), which GPT does not have.
TEST(BertForMaskedLM, FlopsPerTokenMatchMegatronsFormula) {
  BertConfig base;  // I = 4 C
  Model m(base, 0, /*dry_run=*/true);
  const double h = 768, l = 12, s = 128, V = 30522;
  const double megatron = 72 * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  EXPECT_NEAR(m.model.flops_per_step_token(128, 1.0), megatron + 6 * h * h, 1e-9 * megatron);
  // Masked positions only: the head costs a fraction of that.
  EXPECT_LT(m.model.flops_per_step_token(128, 0.15), megatron);
}

// A step's FLOPs from its micro-batches as they ran: two micro-batches of other lengths (dynamic
// padding) and masked counts cost the sum of Megatron's count for each, with the head at the
// masked positions only (h^2 + h V per masked token, times 6 for forward + backward).
TEST(BertForMaskedLM, StepFlopsSumTheMicroBatchesAsTheyRan) {
  BertConfig base;
  Model m(base, 0, /*dry_run=*/true);
  const double h = 768, l = 12, V = 30522;
  const auto megatron_body = [&](double B, double s) {  // without logits: 72 B s l h^2 (1 + s/6h)
    return 72 * B * s * l * h * h * (1 + s / (6 * h));
  };
  const double expected = megatron_body(8, 40) + megatron_body(8, 128) + 6 * (h * h + h * V) * 61;
  const double got = m.model.step_flops(8 * 40 + 8 * 128, 8 * 40 * 40 + 8 * 128 * 128, 61);
  EXPECT_NEAR(got, expected, 1e-9 * expected);
}

// HF init: N(0, initializer_range) weights, zero biases, LayerNorm 1/0. The sample mean and
// standard deviation of the 2048 word-embedding entries must be within 4 standard errors of
// 0 and sigma (se(mean) = sigma / sqrt(n), se(std) ~ sigma / sqrt(2n)).
TEST(BertForMaskedLM, InitParametersFollowsHuggingFacesDistributionsAndIsDeterministic) {
  const BertConfig c = tiny_config();
  Model a(c, 99), b(c, 99), d(c, 100);
  for (std::size_t i = 0; i < a.model.parameters().size(); ++i) {
    const auto& p = a.model.parameters()[i];
    const float* v = p.value.data<float>();
    const std::int64_t n = p.value.numel();
    EXPECT_EQ(std::vector<float>(v, v + n), std::vector<float>(b.model.parameters()[i].value.data<float>(),
                                                               b.model.parameters()[i].value.data<float>() + n))
        << p.name;
    const bool is_ln_weight = p.name.find("LayerNorm.weight") != std::string::npos;
    const bool is_bias = p.name.size() > 4 && p.name.substr(p.name.size() - 4) == "bias";
    if (is_ln_weight || is_bias) {
      for (std::int64_t j = 0; j < n; ++j) ASSERT_EQ(v[j], is_ln_weight ? 1.0f : 0.0f) << p.name;
    }
  }
  const auto& word = a.model.parameters().front();
  const float* w = word.value.data<float>();
  const std::int64_t n = word.value.numel();
  double mean = 0, sq = 0;
  for (std::int64_t j = 0; j < n; ++j) mean += w[j];
  mean /= n;
  for (std::int64_t j = 0; j < n; ++j) sq += (w[j] - mean) * (w[j] - mean);
  const double sd = std::sqrt(sq / (n - 1)), sigma = c.initializer_range;
  EXPECT_LT(std::abs(mean), 4 * sigma / std::sqrt(double(n)));
  EXPECT_LT(std::abs(sd - sigma), 4 * sigma / std::sqrt(2.0 * n));
  // A different seed gives different weights.
  EXPECT_NE(w[0], d.model.parameters().front().value.data<float>()[0]);
}

// Every activation and temporary is freed by the end of a step (Note: layers free what their
// backward consumed); only parameters and gradients stay.
TEST(BertForMaskedLM, StepLeavesOnlyParametersAndGradientsAllocated) {
  const BertConfig c = tiny_config();
  Model m(c);
  const auto params = m.alloc->live_bytes();
  m.model.forward_backward(memtrain::testing::synthetic_batch(2, 12, c.vocab_size, 0), 0.1f, 1, 1);
  EXPECT_EQ(m.alloc->live_bytes(core::tags().activation), 0);
  EXPECT_EQ(m.alloc->live_bytes(core::tags().temporary), 0);
  EXPECT_EQ(m.alloc->live_bytes(), params);
  EXPECT_GT(m.alloc->peak_bytes(), params);
  m.model.evaluate(memtrain::testing::synthetic_batch(2, 12, c.vocab_size, 0));
  EXPECT_EQ(m.alloc->live_bytes(), params);
}

// Design.md: a dry run asks the allocator for exactly what the compute run does.
TEST(BertForMaskedLM, DryRunMakesTheSameAllocationsAsComputeRun) {
  const BertConfig c = tiny_config();
  const auto batch = memtrain::testing::synthetic_batch(2, 12, c.vocab_size, 0);
  Model real(c), dry(c, 7, /*dry_run=*/true);
  real.model.forward_backward(batch, 0.1f, 1, 1);
  dry.model.forward_backward(batch, 0.1f, 1, 1);
  EXPECT_EQ(real.alloc->num_allocs(), dry.alloc->num_allocs());
  EXPECT_EQ(real.alloc->peak_bytes(), dry.alloc->peak_bytes());
  EXPECT_EQ(real.alloc->live_bytes(), dry.alloc->live_bytes());
}

TEST(BertForMaskedLM, MicroBatchWithoutMaskedTokensContributesNothing) {
  const BertConfig c = tiny_config();
  Model m(c);
  auto batch = memtrain::testing::synthetic_batch(2, 12, c.vocab_size, 0);
  batch.masked_positions.clear();
  batch.masked_labels.clear();
  StepStats s = m.model.forward_backward(batch, 0.1f, 1, 1);
  EXPECT_EQ(s.num_masked, 0);
  EXPECT_EQ(s.loss_sum, 0.0);
  for (const auto& g : memtrain::testing::copy_grads(m.model.parameters())) {
    for (float x : g) ASSERT_EQ(x, 0.0f);
  }
}

void expect_batch_error(const core::MlmBatch& batch, const std::string& needle) {
  const BertConfig c = tiny_config();
  Model m(c);
  try {
    m.model.forward_backward(batch, 0.1f, 1, 1);
    ADD_FAILURE() << "no error; expected one mentioning " << needle;
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  for (const auto& g : memtrain::testing::copy_grads(m.model.parameters())) {
    for (float x : g) ASSERT_EQ(x, 0.0f);
  }
  EXPECT_EQ(m.alloc->live_bytes(core::tags().activation), 0);
}

core::MlmBatch good_batch() { return memtrain::testing::synthetic_batch(2, 12, 64, 0); }

TEST(BertForMaskedLMBadInput, TokenIdOutsideTheVocabulary) {
  auto b = good_batch();
  b.input_ids[5] = 64;
  expect_batch_error(b, "input_ids[5] = 64 outside [0, vocab_size = 64)");
}

TEST(BertForMaskedLMBadInput, TokenTypeOutsideTheTable) {
  auto b = good_batch();
  b.token_type_ids[3] = 2;
  expect_batch_error(b, "token_type_ids[3] = 2");
}

TEST(BertForMaskedLMBadInput, SequenceLongerThanThePositionTable) {
  auto b = memtrain::testing::synthetic_batch(1, 17, 64, 0);
  expect_batch_error(b, "seq_length = 17 exceeds max_position_embeddings = 16");
}

TEST(BertForMaskedLMBadInput, MaskedPositionsNotAscendingOrOutOfRange) {
  auto b = good_batch();
  std::swap(b.masked_positions[0], b.masked_positions[1]);
  expect_batch_error(b, "strictly ascending");
  auto c = good_batch();
  c.masked_positions.back() = 24;
  expect_batch_error(c, "in [0, 24)");
}

TEST(BertForMaskedLMBadInput, LabelOutsideTheVocabularyOrCountMismatch) {
  auto b = good_batch();
  b.masked_labels[0] = -1;
  expect_batch_error(b, "masked_labels[0] = -1");
  auto c = good_batch();
  c.masked_labels.pop_back();
  expect_batch_error(c, "masked_labels for");
}

TEST(BertForMaskedLMBadInput, ArraysOfTheWrongLength) {
  auto b = good_batch();
  b.attention_mask.pop_back();
  expect_batch_error(b, "attention_mask has 23 entries; expected B * T = 24");
}

TEST(BertForMaskedLMBadConfig, HeadsMustDivideHiddenSize) {
  BertConfig c = tiny_config();
  c.num_attention_heads = 5;
  core::Context ctx(std::make_shared<TestAllocator>());
  try {
    BertForMaskedLM m(c, ctx);
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("num_attention_heads = 5 does not divide "
                                         "model.hidden_size = 32"),
              std::string::npos);
  }
  c = tiny_config();
  c.hidden_dropout_prob = 1.0f;
  EXPECT_THROW(BertForMaskedLM(c, ctx), ConfigError);
}

}  // namespace
}  // namespace memtrain::models
