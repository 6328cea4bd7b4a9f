// precision.bf16_gemm's decision (Note [bf16_gemm: auto measures the step's GEMMs]): which rule
// settles the path for each combination of config, machine, dry run and checkpoint record, the
// test hook that forces what a measurement prefers, the header's and summary's words, and the
// probe's shapes against the model's GEMMs written out by hand. These need no bf16 dot
// products; only the timing of the two paths does.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cpu/matmul_bf16.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/train/bf16_gemm_choice.hpp"
#include "runtime/train/bf16_gemm_probe.hpp"
#include "runtime/train/run_summary.hpp"

namespace memtrain::train {
namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

Bf16GemmInputs auto_on_bf16_cpu() {
  Bf16GemmInputs in;
  in.bf16_on_cpu = true;
  in.configured = "auto";
  in.dot_products = true;
  return in;
}

TEST(Bf16GemmPlan, AutoMeasuresOnlyAFreshComputeRunWithDotProducts) {
  EXPECT_EQ(plan_bf16_gemm(auto_on_bf16_cpu()).basis, Bf16GemmBasis::measurement);

  auto in = auto_on_bf16_cpu();
  in.dot_products = false;
  EXPECT_EQ(plan_bf16_gemm(in).basis, Bf16GemmBasis::no_dot_products);
  EXPECT_FALSE(plan_bf16_gemm(in).native);

  in = auto_on_bf16_cpu();
  in.dry_run = true;  // deterministic and fast: the rule from before auto measured
  EXPECT_EQ(plan_bf16_gemm(in).basis, Bf16GemmBasis::dry_run);
  EXPECT_TRUE(plan_bf16_gemm(in).native);

  in = auto_on_bf16_cpu();
  in.bf16_on_cpu = false;  // fp32, fp16, or a GPU: the model options as built
  EXPECT_EQ(plan_bf16_gemm(in).basis, Bf16GemmBasis::not_applicable);
}

TEST(Bf16GemmPlan, AResumeWithAutoKeepsTheRecordedPathWithoutMeasuring) {
  auto in = auto_on_bf16_cpu();
  in.resuming = true;
  for (const std::string recorded : {"native", "fp32"}) {
    in.recorded = recorded;
    const auto p = plan_bf16_gemm(in);
    EXPECT_EQ(p.basis, Bf16GemmBasis::checkpoint) << recorded;
    EXPECT_EQ(p.native, recorded == "native") << recorded;
  }
  // A checkpoint from before the record: oneDNN wherever there are dot products, as auto was.
  in.recorded = "";
  EXPECT_EQ(plan_bf16_gemm(in).basis, Bf16GemmBasis::old_checkpoint);
  EXPECT_TRUE(plan_bf16_gemm(in).native);
}

TEST(Bf16GemmPlan, AnExplicitPathOverridesTheRecordAndTheMeasurement) {
  for (const bool resuming : {false, true}) {
    auto in = auto_on_bf16_cpu();
    in.resuming = resuming;
    in.recorded = resuming ? "native" : "";
    in.configured = "fp32";
    EXPECT_EQ(plan_bf16_gemm(in).basis, Bf16GemmBasis::config);
    EXPECT_FALSE(plan_bf16_gemm(in).native);
    in.recorded = resuming ? "fp32" : "";
    in.configured = "native";
    EXPECT_EQ(plan_bf16_gemm(in).basis, Bf16GemmBasis::config);
    EXPECT_TRUE(plan_bf16_gemm(in).native);
  }
  auto in = auto_on_bf16_cpu();
  in.configured = "onednn";
  EXPECT_THROW(plan_bf16_gemm(in), std::invalid_argument);
  in = auto_on_bf16_cpu();
  in.resuming = true;
  in.recorded = "bf16";
  EXPECT_THROW(plan_bf16_gemm(in), std::invalid_argument);
}

// Sets MEMTRAIN_BF16_GEMM_PREFER for one scope.
class PreferEnv {
 public:
  explicit PreferEnv(const char* value) {
    if (value != nullptr) {
      ::setenv("MEMTRAIN_BF16_GEMM_PREFER", value, 1);
    } else {
      ::unsetenv("MEMTRAIN_BF16_GEMM_PREFER");
    }
  }
  ~PreferEnv() { ::unsetenv("MEMTRAIN_BF16_GEMM_PREFER"); }
};

TEST(Bf16GemmPlan, TheTestHookForcesWhatTheMeasurementPrefers) {
  const Bf16GemmSpeeds native_faster{30e9, 20e9}, fp32_faster{20e9, 30e9};
  EXPECT_TRUE(prefers_native(native_faster, std::nullopt));
  EXPECT_FALSE(prefers_native(fp32_faster, std::nullopt));
  EXPECT_TRUE(prefers_native(Bf16GemmSpeeds{25e9, 25e9}, std::nullopt));
  {
    const PreferEnv env(nullptr);
    EXPECT_EQ(forced_bf16_gemm_preference(), std::nullopt);
  }
  {
    const PreferEnv env("fp32");
    ASSERT_EQ(forced_bf16_gemm_preference(), std::optional<bool>(false));
    EXPECT_FALSE(prefers_native(native_faster, forced_bf16_gemm_preference()));
  }
  {
    const PreferEnv env("native");
    EXPECT_TRUE(prefers_native(fp32_faster, forced_bf16_gemm_preference()));
  }
  {
    const PreferEnv env("onednn");
    try {
      forced_bf16_gemm_preference();
      ADD_FAILURE() << "no error";
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()), "MEMTRAIN_BF16_GEMM_PREFER=onednn: expected native or fp32");
    }
  }
}

TEST(Bf16GemmChoice, TheHeaderShowsBothSpeedsAndTheSummaryThePath) {
  Bf16GemmChoice c;
  c.basis = Bf16GemmBasis::measurement;
  c.native = false;
  c.speeds = Bf16GemmSpeeds{28.04e9, 41.23e9};
  const std::string line = bf16_gemm_header_line(c);
  EXPECT_TRUE(has(line,
                  "memtrain: bf16 GEMMs: auto chose fp32 sgemm: 41.2 GFLOP/s against oneDNN bf16 28.0 GFLOP/s on "
                  "the step's shapes"))
      << line;
  EXPECT_FALSE(has(line, "MEMTRAIN_BF16_GEMM_PREFER")) << line;
  c.forced = false;
  EXPECT_TRUE(has(bf16_gemm_header_line(c), "; MEMTRAIN_BF16_GEMM_PREFER=fp32 decided\n"));
  EXPECT_EQ(c.recorded_path(), "fp32");

  RunSummary s;
  s.precision = "bf16";
  s.gemm_path = bf16_gemm_summary(c);
  EXPECT_TRUE(
      has(format_summary(s), "  precision        bf16, fp32 sgemm GEMMs (auto: measured 41.2 against 28.0 GFLOP/s)\n"))
      << format_summary(s);

  c = Bf16GemmChoice{};
  c.basis = Bf16GemmBasis::checkpoint;
  c.native = true;
  EXPECT_TRUE(
      has(bf16_gemm_header_line(c), "auto keeps the checkpoint's oneDNN bf16 (meta.json bf16_gemm), not measured"));
  EXPECT_EQ(c.recorded_path(), "native");

  c = Bf16GemmChoice{};
  c.basis = Bf16GemmBasis::config;
  c.native = false;
  EXPECT_EQ(bf16_gemm_header_line(c), "");  // an override of nothing says nothing
  c.overridden = "native";
  EXPECT_EQ(bf16_gemm_header_line(c),
            "memtrain: bf16 GEMMs: precision.bf16_gemm: fp32 overrides the checkpoint's oneDNN bf16: the run "
            "continues within rounding, not bitwise\n");

  c = Bf16GemmChoice{};  // not a bf16 run on the CPU: nothing said, nothing recorded
  EXPECT_EQ(bf16_gemm_header_line(c), "");
  EXPECT_EQ(bf16_gemm_summary(c), "");
  EXPECT_EQ(c.recorded_path(), "");
}

// bench-bert's shapes (configs/bench-bert.yaml): B 8 x T 128 = 1024 rows, C 768, I 3072, 2
// layers, V 30522, 15% masked = 154 rows; with 2 tensor-parallel ranks, the column-parallel
// outputs and the row-parallel inputs halve and the vocabulary is padded to 30720 (128 x 2).
TEST(StepForwardGemms, AreTheModelsForwardGemmsOfOneMicroBatch) {
  Config c;
  c.model.vocab_size = 30522;
  c.model.hidden_size = 768;
  c.model.num_hidden_layers = 2;
  c.model.intermediate_size = 3072;
  c.data.seq_length = 128;
  c.training.micro_batch_size = 8;
  const auto g = step_forward_gemms(c, 1, 30522);
  ASSERT_EQ(g.size(), 6u);
  const int expected[6][4] = {{1024, 768, 2304, 2}, {1024, 768, 768, 2}, {1024, 768, 3072, 2},
                              {1024, 3072, 768, 2}, {154, 768, 768, 1},  {154, 768, 30522, 1}};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(g[i].rows, expected[i][0]) << g[i].name;
    EXPECT_EQ(g[i].in, expected[i][1]) << g[i].name;
    EXPECT_EQ(g[i].out, expected[i][2]) << g[i].name;
    EXPECT_EQ(g[i].count, expected[i][3]) << g[i].name;
  }
  const auto tp = step_forward_gemms(c, 2, 30720);
  EXPECT_EQ(tp[0].out, 1152);
  EXPECT_EQ(tp[1].in, 384);
  EXPECT_EQ(tp[2].out, 1536);
  EXPECT_EQ(tp[3].in, 1536);
  EXPECT_EQ(tp[5].out, 15360);
  // Taller micro-batches are probed on kProbeMaxRows rows.
  c.data.seq_length = 512;
  const auto tall = step_forward_gemms(c, 1, 30522);
  EXPECT_EQ(tall[0].rows, kProbeMaxRows);
  EXPECT_EQ(tall[5].rows, 614);  // 15% of 4096
}

TEST(MeasureBf16GemmPaths, ReportsAPositiveSpeedForEachPath) {
  EXPECT_THROW(measure_bf16_gemm_paths({}), std::invalid_argument);
  EXPECT_THROW(measure_bf16_gemm_paths({StepGemm{"bad", 0, 8, 8, 1}}), std::invalid_argument);
  if (!kernels::bf16_gemm_native()) {
    GTEST_SKIP() << "oneDNN runs no native bf16 matmul here (" << kernels::bf16_gemm_description()
                 << "): auto does not measure";
  }
  const auto s = measure_bf16_gemm_paths({StepGemm{"a", 64, 96, 128, 2}, StepGemm{"b", 5, 32, 64, 1}}, 3);
  EXPECT_TRUE(std::isfinite(s.native_flops) && s.native_flops > 0) << s.native_flops;
  EXPECT_TRUE(std::isfinite(s.fp32_flops) && s.fp32_flops > 0) << s.fp32_flops;
}

}  // namespace
}  // namespace memtrain::train
