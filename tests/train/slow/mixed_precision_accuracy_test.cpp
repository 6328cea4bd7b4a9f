// Issue 5, "Tests": on the tiny config on the KJV, fp16 (dynamic loss scaling) and bf16 reach a
// final eval_loss within 2% of fp32 after the same number of steps, from the same seeds. The
// reference is the fp32 run of the same config; the measured numbers are recorded in
// docs/precision-and-recompute.md.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/config/config_loader.hpp"
#include "runtime/config/config_validate.hpp"
#include "runtime/train/trainer.hpp"
#include "tests/train/temp_dir.hpp"

namespace memtrain::train {
namespace {

struct Outcome {
  double eval_loss = NAN;
  double loss_scale = NAN;
  std::int64_t skipped_steps = -1;
};

// The last eval line's loss and the last training line's loss scale of run_dir/metrics.jsonl.
Outcome read_outcome(const std::string& metrics) {
  std::ifstream in(metrics);
  Outcome o;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("eval_loss")) o.eval_loss = j["eval_loss"].get<double>();
    if (j.contains("loss_scale")) {
      o.loss_scale = j["loss_scale"].get<double>();
      o.skipped_steps = j["skipped_steps"].get<std::int64_t>();
    }
  }
  return o;
}

// 200 steps (issue: at least 150), warmup 20, seed 1234 for initialisation, masking and
// dropout (tiny.yaml's), the whole validation split (20 batches of 16) at the end.
Outcome train_tiny(const std::string& dtype, const std::string& run_dir) {
  const std::string src = MEMTRAIN_SOURCE_DIR;
  const Config c = load_config(
      src + "/configs/tiny.yaml",
      {"precision.dtype=" + dtype, "training.max_steps=200", "training.warmup_steps=20", "training.eval_interval=200",
       "training.log_interval=50", "training.seed=1234", "data.cache_dir=" + src + "/.cache/memtrain"});
  EXPECT_EQ(run_training(c, RunOptions{run_dir}), 0);
  return read_outcome(run_dir + "/metrics.jsonl");
}

TEST(MixedPrecisionAccuracy, Fp16AndBf16EndWithinTwoPercentOfFp32OnTinyKjv) {
  if (find_program("bible").empty()) GTEST_SKIP() << "bible-kjv is not installed";
  testing::TempDir tmp;
  const Outcome fp32 = train_tiny("fp32", tmp.sub("fp32"));
  const Outcome fp16 = train_tiny("fp16", tmp.sub("fp16"));
  const Outcome bf16 = train_tiny("bf16", tmp.sub("bf16"));
  std::printf(
      "final eval_loss after 200 steps, seed 1234: fp32 %.6f, fp16 %.6f (loss scale %g, %lld skipped), "
      "bf16 %.6f\n",
      fp32.eval_loss, fp16.eval_loss, fp16.loss_scale, static_cast<long long>(fp16.skipped_steps), bf16.eval_loss);
  ASSERT_TRUE(std::isfinite(fp32.eval_loss));
  EXPECT_LT(fp32.eval_loss, 7.0);  // it trained: the uniform guess is ln(8192) = 9.01
  EXPECT_NEAR(fp16.eval_loss, fp32.eval_loss, 0.02 * fp32.eval_loss);
  EXPECT_NEAR(bf16.eval_loss, fp32.eval_loss, 0.02 * fp32.eval_loss);
  EXPECT_EQ(bf16.loss_scale, 1.0);
  EXPECT_GE(fp16.loss_scale, 1.0);
}

}  // namespace
}  // namespace memtrain::train
