// `memtrain plan` as a user runs it (issue 4, "memtrain plan"): exit codes, the JSON contract,
// model states against the ZeRO paper's closed form, and the largest micro-batch against the
// plan's own fits answer one micro-batch further.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::Scratch;

// hidden 64, 2 layers, intermediate 128, vocab 100, 32 positions, 2 token types.
const char* kPlanYaml =
    "model:\n"
    "  vocab_size: 100\n"
    "  hidden_size: 64\n"
    "  num_hidden_layers: 2\n"
    "  num_attention_heads: 4\n"
    "  intermediate_size: 128\n"
    "  max_position_embeddings: 32\n"
    "data:\n"
    "  seq_length: 32\n"
    "training:\n"
    "  micro_batch_size: 4\n"
    "  global_batch_size: 8\n";

// BERT's trainable scalars by hand (Devlin et al. 2019; Hugging Face BertForMaskedLM, decoder
// tied to the word embeddings): embeddings V*h + P*h + 2*h + LayerNorm 2h; per layer QKV and
// output 4h^2 + 4h, two LayerNorms 4h, MLP 2*h*I + I + h; head transform h^2 + h, LayerNorm 2h,
// decoder bias V.
std::int64_t bert_parameters(std::int64_t V, std::int64_t h, std::int64_t L, std::int64_t I, std::int64_t P) {
  const std::int64_t embeddings = V * h + P * h + 2 * h + 2 * h;
  const std::int64_t layer = 4 * h * h + 4 * h + 4 * h + 2 * h * I + I + h;
  const std::int64_t head = h * h + h + 2 * h + V;
  return embeddings + L * layer + head;
}

nlohmann::json plan_json(const Scratch& s, const std::string& args, int expected_exit) {
  const auto r = s.memtrain("plan --config exp.yaml --json " + args);
  EXPECT_EQ(r.exit_code, expected_exit) << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(Plan, FittingConfigExitsZeroWithEveryDocumentedKey) {
  Scratch s;
  s.write("exp.yaml", kPlanYaml);
  const auto j = plan_json(s, "--target a100-40gb", 0);
  ASSERT_TRUE(j.is_object());
  for (const char* key : {"policy", "parameters", "model_state_bytes", "activation_peak_bytes", "peak_allocated_bytes",
                          "peak_reserved_bytes", "non_allocator_bytes", "utilization", "fragmentation", "fits",
                          "max_micro_batch_size", "per_tag_peak_bytes"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["policy"], "best_fit");  // memory.policy's default
  EXPECT_TRUE(j["fits"].get<bool>());
  EXPECT_GE(j["peak_reserved_bytes"].get<std::int64_t>(), j["peak_allocated_bytes"].get<std::int64_t>());
  EXPECT_GT(j["per_tag_peak_bytes"]["activation"].get<std::int64_t>(), 0);
  // nvidia-smi's memory.total of an A100-SXM4-40GB: 40960 MiB.
  EXPECT_EQ(j["capacity_bytes"].get<std::int64_t>(), 40960LL << 20);
  EXPECT_TRUE(j["analytic"]["korthikanti_tensor_parallel_bytes_per_layer"].is_null());
}

TEST(Plan, TextReportNamesEveryFigure) {
  Scratch s;
  s.write("exp.yaml", kPlanYaml);
  const auto r = s.memtrain("plan --config exp.yaml --target h100-80gb");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* line :
       {"parameters", "model states", "ZeRO stage 0 (16 B/param)", "Korthikanti", "peak allocated", "peak reserved",
        "non-allocator", "utilization", "fragmentation", "largest micro-batch that fits", "fits"}) {
    EXPECT_TRUE(contains(r.out, line));
  }
}

// ZeRO (Rajbhandari et al. 2020, section 3.1): 16 bytes per parameter for Adam in fp32
// (4 + 4 + 8) and in mixed precision (2 + 2 + 4 + 8); 18 with fp32 gradient accumulation. The
// plan counts requested bytes per tag, so each part is the closed form to the byte.
struct ZeroCase {
  const char* name;
  const char* sets;
  int parameter, gradient, master_weight;  // bytes per parameter; Adam's two moments add 8
};

class ZeroAccounting : public ::testing::TestWithParam<ZeroCase> {};

TEST_P(ZeroAccounting, ModelStatesEqualTheClosedFormToTheByte) {
  Scratch s;
  s.write("exp.yaml", kPlanYaml);
  const auto j = plan_json(s, std::string("--target 1GiB ") + GetParam().sets, 0);
  const std::int64_t n = bert_parameters(100, 64, 2, 128, 32);
  EXPECT_EQ(j["parameters"].get<std::int64_t>(), n);
  const ZeroCase& c = GetParam();
  const auto& parts = j["model_state_breakdown"];
  EXPECT_EQ(parts["parameter"].get<std::int64_t>(), n * c.parameter);
  EXPECT_EQ(parts["gradient"].get<std::int64_t>(), n * c.gradient);
  EXPECT_EQ(parts["master_weight"].get<std::int64_t>(), n * c.master_weight);
  EXPECT_EQ(parts["optimizer_state"].get<std::int64_t>(), n * 8);
  const int per_parameter = c.parameter + c.gradient + c.master_weight + 8;
  EXPECT_EQ(j["model_state_bytes"].get<std::int64_t>(), n * per_parameter);
  EXPECT_EQ(j["analytic"]["zero_bytes_per_parameter"].get<double>(), per_parameter);
}

// ZeRO-1 (Rajbhandari et al. 2020, section 5.1): the optimizer state K = 12 (mixed precision:
// master 4 + moments 8) or 8 (fp32) is divided over the N_d data-parallel ranks, the value and
// gradient stay whole: 2 + 2 + 12 / N_d, 4 + 4 + 8 / N_d. The tiny model's one gradient bucket
// holds n = 80036 elements, a multiple of 2 and 4, so the shards are exact.
struct Zero1Case {
  const char* name;
  const char* sets;
  int world;
  int value_and_gradient;  // bytes per parameter
  int sharded;             // K
};

class Zero1Accounting : public ::testing::TestWithParam<Zero1Case> {};

TEST_P(Zero1Accounting, ModelStatesFollowThePapersStageOneFormulaExactly) {
  const Zero1Case& c = GetParam();
  Scratch s;
  s.write("exp.yaml", kPlanYaml);
  const auto j = plan_json(
      s,
      std::string("--target 1GiB --set parallel.zero_stage=1 --set training.global_batch_size=16 --world-size ") +
          std::to_string(c.world) + " " + c.sets,
      0);
  const std::int64_t n = bert_parameters(100, 64, 2, 128, 32);
  ASSERT_EQ(n % 4, 0);
  EXPECT_EQ(j["zero_stage"].get<int>(), 1);
  const auto& parts = j["model_state_breakdown"];
  EXPECT_EQ(parts["master_weight"].get<std::int64_t>() + parts["optimizer_state"].get<std::int64_t>(),
            n * c.sharded / c.world);
  EXPECT_EQ(j["model_state_bytes"].get<std::int64_t>(), n * c.value_and_gradient + n * c.sharded / c.world);
  EXPECT_DOUBLE_EQ(j["analytic"]["zero_bytes_per_parameter"].get<double>(),
                   c.value_and_gradient + static_cast<double>(c.sharded) / c.world);
  EXPECT_DOUBLE_EQ(j["analytic"]["model_state_ratio"].get<double>(), 1.0);
}

INSTANTIATE_TEST_SUITE_P(Stages, Zero1Accounting,
                         ::testing::Values(Zero1Case{"fp32_dp2", "", 2, 8, 8}, Zero1Case{"fp32_dp4", "", 4, 8, 8},
                                           Zero1Case{"bf16_dp2", "--set precision.dtype=bf16", 2, 4, 12},
                                           Zero1Case{"bf16_dp4", "--set precision.dtype=bf16", 4, 4, 12},
                                           Zero1Case{"fp16_dp4", "--set precision.dtype=fp16", 4, 4, 12}),
                         [](const ::testing::TestParamInfo<Zero1Case>& info) { return std::string(info.param.name); });

INSTANTIATE_TEST_SUITE_P(
    Precisions, ZeroAccounting,
    ::testing::Values(ZeroCase{"fp32", "", 4, 4, 0}, ZeroCase{"fp16", "--set precision.dtype=fp16", 2, 2, 4},
                      ZeroCase{"bf16", "--set precision.dtype=bf16", 2, 2, 4},
                      ZeroCase{"bf16_fp32_grads",
                               "--set precision.dtype=bf16 --set precision.fp32_grad_accumulation=true", 2, 4, 4}),
    [](const ::testing::TestParamInfo<ZeroCase>& info) { return std::string(info.param.name); });

TEST(Plan, UnknownTargetIsExitTwoWithTheNames) {
  Scratch s;
  s.write("exp.yaml", kPlanYaml);
  const auto r = s.memtrain("plan --config exp.yaml --target v100");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "--target v100: unknown target; expected a100-40gb, a100-80gb, h100-80gb, h200-141gb"));
}

TEST(Plan, UnknownPolicyIsExitTwoWithTheNames) {
  Scratch s;
  s.write("exp.yaml", kPlanYaml);
  const auto r = s.memtrain("plan --config exp.yaml --target a100-40gb --policy first_fit");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "--policy first_fit: unknown policy; expected one of"));
  EXPECT_TRUE(contains(r.err, "vmm_stitch"));
}

// A policy named twice printed the same report twice; it is refused as a duplicate --config is.
TEST(Plan, APolicyGivenTwiceIsExitTwo) {
  Scratch s;
  s.write("exp.yaml", kPlanYaml);
  const auto r =
      s.memtrain("plan --config exp.yaml --target a100-40gb --policy pytorch --policy best_fit --policy pytorch");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain: config error: --policy pytorch is given twice; expected each policy once"));
  EXPECT_EQ(r.out, "");
}

// Too small for the model states alone: an answer, not an error.
TEST(Plan, TinyCapacityIsExitThreeNeedsXHasY) {
  Scratch s;
  s.write("exp.yaml", kPlanYaml);
  const auto r = s.memtrain("plan --config exp.yaml --target 64KiB");
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_TRUE(contains(r.out, "does not fit: needs"));
  EXPECT_TRUE(contains(r.err, "does not fit: needs"));
  EXPECT_TRUE(contains(r.err, "has 64.00 KiB; largest micro-batch that fits: 0"));
  const auto j = plan_json(s, "--target 64KiB", 3);
  EXPECT_FALSE(j["fits"].get<bool>());
  EXPECT_EQ(j["max_micro_batch_size"].get<int>(), 0);
  EXPECT_GT(j["needed_bytes"].get<std::int64_t>(), 64 << 10);
}

TEST(Plan, SeveralPoliciesGiveAnArrayInTheirOrder) {
  Scratch s;
  s.write("exp.yaml", kPlanYaml);
  const auto j =
      plan_json(s, "--target a100-40gb --policy pytorch --policy best_fit --policy vmm_stitch --policy planned", 0);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 4u);
  EXPECT_EQ(j[0]["policy"], "pytorch");
  EXPECT_EQ(j[3]["policy"], "planned");
  // Every policy serves the same requests: the same live bytes at the peak of the same step.
  for (const auto& p : j) EXPECT_EQ(p["activation_peak_bytes"], j[0]["activation_peak_bytes"]);
}

TEST(Plan, NcclBuffersAreChargedOnlyWithSeveralRanks) {
  Scratch s;
  s.write("exp.yaml", kPlanYaml);
  const auto one = plan_json(s, "--target a100-40gb", 0);
  const auto two = plan_json(s, "--target a100-40gb --world-size 2", 0);
  EXPECT_EQ(one["non_allocator_breakdown"]["nccl_buffers"].get<std::int64_t>(), 0);
  EXPECT_GT(two["non_allocator_breakdown"]["nccl_buffers"].get<std::int64_t>(), 0);
  EXPECT_EQ(one["accumulation_steps"].get<int>(), 2);  // 8 sequences, micro-batch 4, one rank
  EXPECT_EQ(two["accumulation_steps"].get<int>(), 1);  // this rank's 4 of the 8
  const auto override = plan_json(s, "--target a100-40gb --non-allocator 1GiB", 0);
  EXPECT_EQ(override["non_allocator_bytes"].get<std::int64_t>(), 1LL << 30);
}

// 16-bit gradients on several ranks are summed through the all-reduce's f32 staging buffer,
// allocated up front (tag communication): the plan of one rank of two holds it, of one rank not.
TEST(Plan, SixteenBitDataParallelPlanHoldsTheStagingBuffer) {
  Scratch s;
  s.write("exp.yaml", kPlanYaml);
  const auto one = plan_json(s, "--target 1GiB --set precision.dtype=bf16", 0);
  const auto two = plan_json(s, "--target 1GiB --set precision.dtype=bf16 --world-size 2", 0);
  EXPECT_FALSE(one["per_tag_peak_bytes"].contains("communication") &&
               one["per_tag_peak_bytes"]["communication"].get<std::int64_t>() > 0);
  // The staging buffer holds the largest gradient bucket as f32. The whole model fits in one
  // bucket of the default 25 MiB (Note [Gradients live in buckets]), and in one staging chunk.
  const auto params = two["parameters"].get<std::int64_t>();
  ASSERT_LT(params, std::int64_t{1} << 20);
  EXPECT_EQ(two["per_tag_peak_bytes"]["communication"].get<std::int64_t>(), params * 4);
  // With buckets of 10 KiB every gradient larger than 5120 bf16 elements is a bucket of its
  // own, and the largest is an MLP weight, intermediate 128 x hidden 64 (more than the 100 x 64
  // word embeddings).
  const auto small = plan_json(s,
                               "--target 1GiB --set precision.dtype=bf16 --set parallel.bucket_size_mb=0.009765625 "
                               "--world-size 2",
                               0);
  EXPECT_EQ(small["per_tag_peak_bytes"]["communication"].get<std::int64_t>(), 128 * 64 * 4);
}

TEST(Plan, TargetsHaveTheirNvidiaSmiCapacities) {
  Scratch s;
  s.write("exp.yaml", kPlanYaml);
  EXPECT_EQ(plan_json(s, "--target a100-80gb", 0)["capacity_bytes"].get<std::int64_t>(), 81920LL << 20);
  EXPECT_EQ(plan_json(s, "--target h100-80gb", 0)["capacity_bytes"].get<std::int64_t>(), 81559LL << 20);
  EXPECT_EQ(plan_json(s, "--target h200-141gb", 0)["capacity_bytes"].get<std::int64_t>(), 143771LL << 20);
  EXPECT_EQ(plan_json(s, "--target 3GiB", 0)["capacity_bytes"].get<std::int64_t>(), 3LL << 30);
}

// The search's answer N agrees with plain plans: micro-batch N fits, N + 1 does not.
TEST(Plan, LargestMicroBatchFitsAndOneMoreDoesNot) {
  Scratch s;
  s.write("exp.yaml", kPlanYaml);
  const auto j = plan_json(s, "--target 6MiB", 0);
  const int n = j["max_micro_batch_size"].get<int>();
  ASSERT_GE(n, 4);
  ASSERT_LT(n, 1000);
  const std::string at = "--target 6MiB --set training.micro_batch_size=" + std::to_string(n) +
                         " --set training.global_batch_size=" + std::to_string(n);
  EXPECT_TRUE(plan_json(s, at, 0)["fits"].get<bool>());
  const std::string above = "--target 6MiB --set training.micro_batch_size=" + std::to_string(n + 1) +
                            " --set training.global_batch_size=" + std::to_string(n + 1);
  EXPECT_FALSE(plan_json(s, above, 3)["fits"].get<bool>());
}

// checkpoint.async's staging copy is allocated up front (tag checkpoint): every parameter's
// value, its two f32 AdamW moments and its f32 master when 16-bit, and the 8-byte step count,
// rounded up to whole f32 elements. Without checkpoint.async there is none.
TEST(Plan, AsynchronousCheckpointsHoldAStagingCopyOfTheState) {
  Scratch s;
  s.write("exp.yaml", kPlanYaml);
  const auto sync = plan_json(s, "--target 1GiB --set checkpoint.interval=2", 0);
  EXPECT_FALSE(sync["per_tag_peak_bytes"].contains("checkpoint") &&
               sync["per_tag_peak_bytes"]["checkpoint"].get<std::int64_t>() > 0);
  const auto fp32 = plan_json(s, "--target 1GiB --set checkpoint.interval=2 --set checkpoint.async=true", 0);
  const auto p = fp32["parameters"].get<std::int64_t>();
  EXPECT_EQ(fp32["per_tag_peak_bytes"]["checkpoint"].get<std::int64_t>(), (4 + 8) * p + 8);
  const auto bf16 = plan_json(
      s, "--target 1GiB --set checkpoint.interval=2 --set checkpoint.async=true --set precision.dtype=bf16", 0);
  EXPECT_EQ(bf16["per_tag_peak_bytes"]["checkpoint"].get<std::int64_t>(), ((2 + 8 + 4) * p + 8 + 3) / 4 * 4);
}

}  // namespace
}  // namespace memtrain::cli
