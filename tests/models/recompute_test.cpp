// Activation checkpointing (issue 5): full and selective recompute give gradients bitwise equal
// to a run that saves everything, and a dry run shows what each one saves.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "memory/caching_allocator.hpp"
#include "memory/host_resource.hpp"
#include "memory/simulated_resource.hpp"
#include "memory/trace_recorder.hpp"
#include "kernels/cpu/matmul_bf16.hpp"
#include "models/bert_for_masked_lm.hpp"
#include "models/f32_access.hpp"
#include "runtime/core/tags.hpp"
#include "tests/models/bert_test_util.hpp"

namespace memtrain::models {
namespace {

constexpr int kB = 3, kT = 24, kV = 96;

BertConfig config(int layers, float dropout) {
  return testing::small_bert_config(layers, dropout, /*max_positions=*/32, kV);
}

struct StepResult {
  double loss_sum = 0;
  std::vector<std::vector<unsigned char>> grads;  // each gradient's bytes, any dtype
};

// Two micro-batches accumulated (the second at another first_sample), so the recomputed
// dropout masks must follow the global sample index too.
StepResult train_step(const BertConfig& c, const ModelOptions& options) {
  core::Context ctx(std::make_shared<memory::CachingAllocator>(std::make_shared<memory::HostResource>()));
  BertForMaskedLM model(c, ctx, options);
  model.init_parameters(11);
  StepResult r;
  const auto batch = memtrain::testing::synthetic_batch(2 * kB, kT, kV, 40);
  for (int m = 0; m < 2; ++m) {
    r.loss_sum += model
                      .forward_backward(memtrain::testing::slice_rows(batch, m * kB, kB), 0.02f,
                                        /*seed=*/5, /*step=*/3)
                      .loss_sum;
  }
  for (const auto& p : model.parameters()) {
    const auto* bytes = static_cast<const unsigned char*>(raw_bytes(p.grad));
    r.grads.emplace_back(bytes, bytes + p.grad.nbytes());
  }
  return r;
}

void expect_bitwise_equal(const StepResult& got, const StepResult& ref, const std::vector<Parameter>& names) {
  EXPECT_EQ(std::memcmp(&got.loss_sum, &ref.loss_sum, sizeof(double)), 0) << got.loss_sum << " vs " << ref.loss_sum;
  ASSERT_EQ(got.grads.size(), ref.grads.size());
  for (std::size_t i = 0; i < ref.grads.size(); ++i) {
    ASSERT_EQ(got.grads[i].size(), ref.grads[i].size());
    EXPECT_EQ(std::memcmp(got.grads[i].data(), ref.grads[i].data(), ref.grads[i].size()), 0)
        << "gradient of " << names[i].name << " differs";
  }
}

using Case = std::tuple<float /*dropout*/, Recompute, RecomputeMethod, int /*num_layers k*/, core::DType>;

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const auto [dropout, recompute, method, k, dtype] = info.param;
  return std::string(recompute == Recompute::full ? "full" : "selective") +
         (method == RecomputeMethod::uniform ? "_uniform" : "_block") + std::to_string(k) + "_dropout" +
         std::to_string(static_cast<int>(dropout * 10 + 0.5f)) + "_" + core::dtype_name(dtype);
}

class RecomputeIsBitwiseExact : public ::testing::TestWithParam<Case> {};

// Three layers, so k = 1 and 2 under uniform (0 / 0, 2) and block (0 / 0, 1) checkpoint
// different subsets, and k = 0 all of them. Issue 5 asks for fp32; bf16 holds too, because
// the rerun rounds exactly as the first run did and selective stores the rebuilt
// probabilities in 16 bits as standard keeps them.
TEST_P(RecomputeIsBitwiseExact, LossAndEveryGradientEqualTheRunThatSavesEverything) {
  const auto [dropout, recompute, method, k, dtype] = GetParam();
  const auto c = config(3, dropout);
  ModelOptions base;
  base.compute_dtype = dtype;
  // The run without recompute is the same for every case of a (dropout, dtype): computed once.
  static std::map<std::pair<float, core::DType>, StepResult> refs;
  auto it = refs.find({dropout, dtype});
  if (it == refs.end()) it = refs.emplace(std::pair{dropout, dtype}, train_step(c, base)).first;
  const StepResult& ref = it->second;
  ModelOptions o = base;
  o.recompute = recompute;
  o.recompute_method = method;
  o.recompute_num_layers = k;
  core::Context ctx(std::make_shared<memtrain::testing::TestAllocator>(false));
  ctx.set_dry_run(true);
  BertForMaskedLM names(c, ctx);
  expect_bitwise_equal(train_step(c, o), ref, names.parameters());
}

INSTANTIATE_TEST_SUITE_P(DropoutGranularityMethodLayers, RecomputeIsBitwiseExact,
                         ::testing::Combine(::testing::Values(0.1f, 0.5f),
                                            ::testing::Values(Recompute::full, Recompute::selective),
                                            ::testing::Values(RecomputeMethod::uniform, RecomputeMethod::block),
                                            ::testing::Values(0, 1, 2), ::testing::Values(core::DType::f32)),
                         case_name);

INSTANTIATE_TEST_SUITE_P(SixteenBit, RecomputeIsBitwiseExact,
                         ::testing::Combine(::testing::Values(0.1f),
                                            ::testing::Values(Recompute::full, Recompute::selective),
                                            ::testing::Values(RecomputeMethod::uniform), ::testing::Values(0, 2),
                                            ::testing::Values(core::DType::bf16, core::DType::f16)),
                         case_name);

// With oneDNN's bf16 GEMMs (Note [bf16 GEMMs through oneDNN]) the rerun calls the same
// primitives on the same operands, so recompute stays bitwise.
TEST(RecomputeIsBitwiseExactWithBf16Gemms, FullAndSelective) {
  if (!kernels::bf16_gemm_native()) {
    GTEST_SKIP() << "this CPU has no bf16 dot products (" << kernels::bf16_gemm_description() << ")";
  }
  const auto c = config(3, 0.1f);
  ModelOptions base;
  base.compute_dtype = core::DType::bf16;
  base.native_bf16_gemm = true;
  const StepResult ref = train_step(c, base);
  core::Context ctx(std::make_shared<memtrain::testing::TestAllocator>(false));
  ctx.set_dry_run(true);
  BertForMaskedLM names(c, ctx);
  for (const Recompute r : {Recompute::full, Recompute::selective}) {
    SCOPED_TRACE(r == Recompute::full ? "full" : "selective");
    ModelOptions o = base;
    o.recompute = r;
    expect_bitwise_equal(train_step(c, o), ref, names.parameters());
  }
}

TEST(RecomputeLayers, UniformTakesEveryKthLayerAndBlockTheFirstK) {
  ModelOptions o;
  o.recompute = Recompute::full;
  o.recompute_num_layers = 2;
  std::vector<bool> uniform, block;
  for (int l = 0; l < 5; ++l) uniform.push_back(recomputes_layer(o, l, 5));
  o.recompute_method = RecomputeMethod::block;
  for (int l = 0; l < 5; ++l) block.push_back(recomputes_layer(o, l, 5));
  EXPECT_EQ(uniform, (std::vector<bool>{true, false, true, false, true}));
  EXPECT_EQ(block, (std::vector<bool>{true, true, false, false, false}));
}

// Peak bytes of tag activation over one training step, planned by a dry run on a simulated
// device (design.md, "Execution modes").
std::int64_t activation_peak(const BertConfig& c, const ModelOptions& options, int B, int T) {
  auto alloc = std::make_shared<memory::CachingAllocator>(
      std::make_shared<memory::SimulatedResource>(std::size_t{1} << 34, "simulated 16 GiB"));
  core::Context ctx(alloc);
  ctx.set_dry_run(true);
  BertForMaskedLM model(c, ctx, options);
  model.forward_backward(memtrain::testing::synthetic_batch(B, T, kV, 0), 0.05f, 1, 1);
  return alloc->stats().per_tag.at(core::tags().activation).requested_bytes.peak;
}

// Korthikanti et al. 2022, sec. 4.1: with full recompute a layer holds only its input
// (s b h elements) between the passes, plus, during backward, one layer's working set. That
// working set W is measured, not assumed: the per-layer activation bytes of a run that saves
// everything, W = peak(2 layers) - peak(1 layer). The peak comes while the last layer reruns
// its forward pass: the L - 1 earlier inputs, that layer's W (its own input included), the
// rerun's output (one more s b h), and what the embeddings keep for their LayerNorm (its input
// s b h and mean, rstd of s b floats each).
class RecomputeMemory : public ::testing::TestWithParam<core::DType> {};

TEST_P(RecomputeMemory, FullRecomputeKeepsOneInputPerLayerPlusOneLayersWorkingSet) {
  const int B = 4, T = 32, L = 6;
  const std::int64_t elem = core::dtype_size(GetParam());
  const std::int64_t input_bytes = std::int64_t{B} * T * 32 * elem;  // [B, T, C]
  // LayerNorm statistics stay f32 in every mode (models/layer_norm.cpp).
  const std::int64_t embeddings_bytes = input_bytes + 2 * std::int64_t{B} * T * 4;
  ModelOptions none;
  none.compute_dtype = GetParam();
  ModelOptions full = none;
  full.recompute = Recompute::full;
  const auto one = activation_peak(config(1, 0.1f), none, B, T);
  const auto two = activation_peak(config(2, 0.1f), none, B, T);
  const std::int64_t W = two - one;
  ASSERT_GT(W, 4 * input_bytes);  // q, k, v, probs, the MLP's [B, T, I]...: far beyond x

  const auto none_L = activation_peak(config(L, 0.1f), none, B, T);
  const auto full_L = activation_peak(config(L, 0.1f), full, B, T);
  EXPECT_EQ(none_L, one + (L - 1) * W);  // saving everything: W per layer
  EXPECT_EQ(full_L, L * input_bytes + W + embeddings_bytes) << "W = " << W << " B, layer input " << input_bytes << " B";
  // Each further checkpointed layer costs exactly its input.
  EXPECT_EQ(full_L - activation_peak(config(L - 1, 0.1f), full, B, T), input_bytes);
}

// Selective recompute drops exactly the [B, NH, T, T] probabilities of every layer from what is
// kept between the passes; nothing else changes.
TEST_P(RecomputeMemory, SelectiveRemovesExactlyTheProbabilitiesOfEachLayer) {
  const int B = 4, T = 32, L = 3, NH = 4;
  ModelOptions none;
  none.compute_dtype = GetParam();
  ModelOptions selective = none;
  selective.recompute = Recompute::selective;
  const auto with_probs = activation_peak(config(L, 0.1f), none, B, T);
  const auto without = activation_peak(config(L, 0.1f), selective, B, T);
  EXPECT_EQ(with_probs - without, std::int64_t{L} * B * NH * T * T * core::dtype_size(GetParam()));
}

// Every allocator event of a step, with or without math (design.md, "Execution modes"): the
// rerun of a checkpointed layer and the rebuilt probabilities allocate the same in both modes,
// and the flash tiles come from the context's workspace, which a dry run never touches.
std::vector<memory::TraceEvent> step_events(const ModelOptions& options, bool dry_run) {
  std::shared_ptr<memory::MemoryResource> upstream;
  if (dry_run) {
    upstream = std::make_shared<memory::SimulatedResource>(std::size_t{1} << 32, "simulated");
  } else {
    upstream = std::make_shared<memory::HostResource>();
  }
  auto alloc = std::make_shared<memory::CachingAllocator>(upstream);
  memory::TraceRecorder recorder;
  alloc->set_event_sink(recorder.sink());
  {
    core::Context ctx(alloc);
    ctx.set_dry_run(dry_run);
    BertForMaskedLM model(config(3, 0.1f), ctx, options);
    model.init_parameters(5);
    model.forward_backward(memtrain::testing::synthetic_batch(kB, kT, kV, 0), 0.05f, 1, 1);
  }
  alloc->set_event_sink(nullptr);
  return recorder.events();
}

TEST_P(RecomputeMemory, DryRunTraceEqualsTheComputeTrace) {
  for (auto [recompute, attention] :
       {std::pair{Recompute::full, AttentionImpl::standard}, std::pair{Recompute::selective, AttentionImpl::standard},
        std::pair{Recompute::full, AttentionImpl::flash}}) {
    ModelOptions o;
    o.compute_dtype = GetParam();
    o.recompute = recompute;
    o.recompute_num_layers = 2;
    o.attention = attention;
    const auto real = step_events(o, false);
    const auto dry = step_events(o, true);
    ASSERT_EQ(real.size(), dry.size());
    ASSERT_GT(real.size(), 0u);
    for (std::size_t i = 0; i < real.size(); ++i) {
      const auto& a = real[i];
      const auto& b = dry[i];
      ASSERT_TRUE(a.kind == b.kind && a.bytes == b.bytes && a.tag == b.tag && a.allocation_id == b.allocation_id)
          << "event " << i << ": " << memory::to_string(a.kind) << " " << a.bytes << " B vs "
          << memory::to_string(b.kind) << " " << b.bytes << " B";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RecomputeMemory, ::testing::Values(core::DType::f32, core::DType::bf16),
                         [](const ::testing::TestParamInfo<core::DType>& info) {
                           return core::dtype_name(info.param);
                         });

// Issue 5's statement at full scale: BERT-Large (Devlin et al. 2019: h = 1024, 24 layers,
// 16 heads, I = 4096), bf16, micro-batch b = 8, s = 512, planned by a dry run. With full
// recompute of every layer the activation peak is 2 s b h bytes per layer plus one layer's
// working set W (measured from 1- and 2-layer runs that save everything), to within the
// embeddings' saved LayerNorm input (one more 2 s b h and its f32 statistics).
TEST(RecomputeMemory, BertLargeFullRecomputePeakIsTwoSbhPerLayerPlusOneWorkingSet) {
  BertConfig c;
  c.vocab_size = 30522;
  c.hidden_size = 1024;
  c.num_attention_heads = 16;
  c.intermediate_size = 4096;
  c.max_position_embeddings = 512;
  c.hidden_dropout_prob = c.attention_probs_dropout_prob = 0.1f;
  const int b = 8, s = 512, L = 24;
  auto layers = [&](int n) {
    BertConfig k = c;
    k.num_hidden_layers = n;
    return k;
  };
  ModelOptions none;
  none.compute_dtype = core::DType::bf16;
  ModelOptions full = none;
  full.recompute = Recompute::full;
  const std::int64_t W = activation_peak(layers(2), none, b, s) - activation_peak(layers(1), none, b, s);
  const std::int64_t sbh2 = 2LL * s * b * c.hidden_size;
  const auto peak = activation_peak(layers(L), full, b, s);
  const double model = static_cast<double>(L * sbh2 + W);
  EXPECT_NEAR(static_cast<double>(peak), model, 0.03 * model);
  EXPECT_EQ(peak, L * sbh2 + W + sbh2 + 2LL * s * b * 4);
  RecordProperty("full_recompute_peak_bytes", std::to_string(peak));
  RecordProperty("layer_working_set_bytes", std::to_string(W));
  RecordProperty("no_recompute_peak_bytes", std::to_string(activation_peak(layers(L), none, b, s)));
}

}  // namespace
}  // namespace memtrain::models
