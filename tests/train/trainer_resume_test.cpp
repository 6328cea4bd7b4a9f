// Resuming a run from its checkpoint (run_training with checkpoints in the run directory): the
// steps after the checkpoint are those of a run that never stopped, bit for bit, in every
// precision, and a resume that would leave the trajectory is refused before anything is
// written.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "runtime/core/errors.hpp"
#include "runtime/train/checkpoint_loader.hpp"
#include "runtime/train/pool_record.hpp"
#include "runtime/train/trainer.hpp"
#include "tests/train/temp_dir.hpp"
#include "tests/train/tiny_config.hpp"

namespace memtrain::train {
namespace {

namespace fs = std::filesystem;
using testing::slurp;

std::vector<nlohmann::json> read_metrics(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// Training lines by step; fails the test when a step appears twice.
std::map<std::int64_t, nlohmann::json> training_lines(const std::string& path) {
  std::map<std::int64_t, nlohmann::json> by_step;
  for (const auto& l : read_metrics(path)) {
    if (!l.contains("loss") || !l.contains("step")) continue;
    EXPECT_TRUE(by_step.emplace(l["step"].get<std::int64_t>(), l).second) << "step twice: " << l.dump();
  }
  return by_step;
}

// Six steps with dropout, a schedule of fixed length, a checkpoint every three steps.
Config resumable_config(const std::string& dtype, int max_steps) {
  Config c = testing::tiny_mock_config();
  c.model.hidden_dropout_prob = 0.1f;
  c.model.attention_probs_dropout_prob = 0.1f;
  c.training.max_steps = max_steps;
  c.training.lr_decay_steps = 6;
  c.training.warmup_steps = 2;
  c.training.log_interval = 1;
  c.training.eval_interval = 3;
  c.training.eval_steps = 2;
  c.checkpoint.interval = 3;
  c.checkpoint.keep_last = 2;
  c.precision.dtype = dtype;
  c.precision.loss_scale.growth_interval = 2;  // fp16: the scale moves across the checkpoint
  return c;
}

int run(const Config& c, const std::string& dir, ResumeMode mode = ResumeMode::automatic) {
  RunOptions options{dir};
  options.resume = mode;
  return run_training(c, options);
}

class ResumeByDtype : public ::testing::TestWithParam<const char*> {};

TEST_P(ResumeByDtype, StepsAfterTheCheckpointEqualAnUninterruptedRunBitwise) {
  testing::TempDir tmp;
  const std::string dtype = GetParam();
  // bf16's straight run and the resumed run's first start each time the two GEMM paths
  // (precision.bf16_gemm: auto); the hook makes them choose alike, so that this tests the
  // resume and not the timing (tests/cli/bf16_gemm_auto_test.cpp tests the choice).
  ::setenv("MEMTRAIN_BF16_GEMM_PREFER", "native", 1);
  struct Unset {
    ~Unset() { ::unsetenv("MEMTRAIN_BF16_GEMM_PREFER"); }
  } unset;
  ASSERT_EQ(run(resumable_config(dtype, 6), tmp.sub("straight")), 0);
  ASSERT_EQ(run(resumable_config(dtype, 3), tmp.sub("resumed")), 0);  // ends with step 3's checkpoint
  ASSERT_EQ(run(resumable_config(dtype, 6), tmp.sub("resumed")), 0);  // lengthened: resumes

  const auto straight = training_lines(tmp.sub("straight/metrics.jsonl"));
  const auto resumed = training_lines(tmp.sub("resumed/metrics.jsonl"));
  ASSERT_EQ(straight.size(), 6u);
  ASSERT_EQ(resumed.size(), 6u);
  for (std::int64_t s = 1; s <= 6; ++s) {
    for (const char* key : {"loss", "grad_norm", "lr", "loss_scale", "skipped_steps"}) {
      EXPECT_EQ(resumed.at(s)[key], straight.at(s)[key]) << dtype << " step " << s << " " << key;
    }
  }
  // The final state, byte for byte: parameters, moments, masters, step count, loss scaler.
  for (const char* f : {"model-tp00.safetensors", "optimizer-tp00.safetensors", "trainer_state.json"}) {
    const std::string a = slurp(tmp.sub(std::string("straight/checkpoints/step-00000006/") + f));
    EXPECT_FALSE(a.empty()) << f;
    EXPECT_EQ(slurp(tmp.sub(std::string("resumed/checkpoints/step-00000006/") + f)), a) << dtype << " " << f;
  }
  // One resumed_from line; each eval step once (step 3's eval is not repeated on resume).
  int resumed_lines = 0;
  std::multiset<std::int64_t> eval_steps;
  for (const auto& l : read_metrics(tmp.sub("resumed/metrics.jsonl"))) {
    if (l.contains("resumed_from")) {
      ++resumed_lines;
      EXPECT_EQ(l["resumed_from"], 3);
      EXPECT_EQ(l["checkpoint"], tmp.sub("resumed/checkpoints/step-00000003"));
    }
    if (l.contains("eval_loss")) eval_steps.insert(l["step"].get<std::int64_t>());
  }
  EXPECT_EQ(resumed_lines, 1);
  EXPECT_EQ(eval_steps, (std::multiset<std::int64_t>{0, 3, 6}));
}

INSTANTIATE_TEST_SUITE_P(Precisions, ResumeByDtype, ::testing::Values("fp32", "fp16", "bf16"));

TEST(Resume, AChangedTrajectoryKeyIsRefusedByNameAndNothingIsWritten) {
  testing::TempDir tmp;
  ASSERT_EQ(run(resumable_config("fp32", 3), tmp.sub("run")), 0);
  const std::string before = slurp(tmp.sub("run/metrics.jsonl"));
  Config changed = resumable_config("fp32", 6);
  changed.training.lr = 2e-2;
  changed.training.seed = 7;
  try {
    run(changed, tmp.sub("run"));
    FAIL() << "resumed with another lr and seed";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cannot resume from checkpoint " + tmp.sub("run/checkpoints/step-00000003")), std::string::npos)
        << m;
    EXPECT_NE(m.find("\n  training.lr: checkpoint 0.01, now 0.02"), std::string::npos) << m;
    EXPECT_NE(m.find("\n  training.seed: checkpoint 1234, now 7"), std::string::npos) << m;
  }
  EXPECT_EQ(slurp(tmp.sub("run/metrics.jsonl")), before);
  // A longer run whose schedule would stretch with it (lr_decay_steps 0 = max_steps).
  Config stretched = resumable_config("fp32", 8);
  stretched.training.lr_decay_steps = 0;  // 8, not the checkpoint's 6
  try {
    run(stretched, tmp.sub("run"));
    FAIL() << "resumed onto a longer schedule";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("set training.lr_decay_steps: 6"), std::string::npos) << e.what();
  }
}

// Starting again from step 0 in a run directory without checkpoints (a relaunch before the
// first one) replaces the earlier start's lines: still no step twice.
TEST(Resume, StartingOverInAUsedRunDirectoryLogsNoStepTwice) {
  testing::TempDir tmp;
  Config c = resumable_config("fp32", 3);
  c.checkpoint.interval = 0;
  ASSERT_EQ(run(c, tmp.sub("run")), 0);
  const auto first = training_lines(tmp.sub("run/metrics.jsonl"));
  ASSERT_EQ(run(c, tmp.sub("run")), 0);
  const auto second = training_lines(tmp.sub("run/metrics.jsonl"));  // fails on a repeated step
  ASSERT_EQ(second.size(), 3u);
  for (std::int64_t s = 1; s <= 3; ++s) EXPECT_EQ(second.at(s)["loss"], first.at(s)["loss"]) << s;
}

// meta.json fields outside their ranges are named, not trusted (a checksum only says the bytes
// are the ones written).
TEST(CheckpointMeta, FieldsOutOfRangeAreNamed) {
  testing::TempDir tmp;
  std::ofstream(tmp.sub("meta.json")) << R"({"step": 4, "tensor_model_parallel_size": 0, "data_parallel_size": 1,
    "lr_decay_steps": 6, "dtype": "fp32"})";
  try {
    read_checkpoint_meta(tmp.str());
    FAIL() << "accepted tensor_model_parallel_size 0";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("field \"tensor_model_parallel_size\" = 0; expected >= 1"), std::string::npos)
        << e.what();
  }
  std::ofstream(tmp.sub("meta.json")) << R"({"step": -1, "tensor_model_parallel_size": 1, "data_parallel_size": 1,
    "lr_decay_steps": 6, "dtype": "fp32"})";
  EXPECT_THROW(read_checkpoint_meta(tmp.str()), RuntimeError);
  // A float where an integer belongs was converted without a word (1e300 reported as INT64_MIN).
  for (const std::string step : {"1e300", "4.5", "18446744073709551615"}) {
    std::ofstream(tmp.sub("meta.json")) << R"({"step": )" + step + R"(, "tensor_model_parallel_size": 1,
      "data_parallel_size": 1, "lr_decay_steps": 6, "dtype": "fp32"})";
    try {
      read_checkpoint_meta(tmp.str());
      FAIL() << "accepted step " << step;
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("field \"step\" = "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("; expected an integer in [-9223372036854775808, 9223372036854775807]"),
                std::string::npos)
          << e.what();
    }
  }
}

// A pooled run's record (Note [A pool record travels with the checkpoints]) is read back as
// written, and a record that is not one is named, field by field.
TEST(CheckpointMeta, ThePoolsRecordIsReadBackAndABadOneIsNamed) {
  testing::TempDir tmp;
  const std::string head = R"({"step": 4, "tensor_model_parallel_size": 1, "data_parallel_size": 1,
    "lr_decay_steps": 6, "dtype": "fp32")";
  std::ofstream(tmp.sub("meta.json")) << head + "}";
  EXPECT_FALSE(read_checkpoint_meta(tmp.str()).pool.has_value());
  std::ofstream(tmp.sub("meta.json")) << head + R"(, "pool": {"trajectory": "within_rounding", "shrinks": 2,
    "grows": 1, "preemptions": 3, "waited_s": 4.5}})";
  const auto pool = read_checkpoint_meta(tmp.str()).pool;
  ASSERT_TRUE(pool.has_value());
  EXPECT_FALSE(pool->bitwise);
  EXPECT_EQ(pool->shrinks, 2);
  EXPECT_EQ(pool->grows, 1);
  EXPECT_EQ(pool->preemptions, 3);
  EXPECT_EQ(pool->waited_s, 4.5);
  const std::pair<std::string, std::string> bad[] = {
      {R"("pool": 3)", "field \"pool\" = 3; expected an object"},
      {R"("pool": {"trajectory": "solo", "shrinks": 0, "grows": 0, "preemptions": 0, "waited_s": 0})",
       "field \"trajectory\" = solo; expected bitwise or within_rounding"},
      {R"("pool": {"trajectory": "bitwise", "shrinks": -1, "grows": 0, "preemptions": 0, "waited_s": 0})",
       "field \"shrinks\" = -1; expected >= 0"},
      {R"("pool": {"trajectory": "bitwise", "shrinks": 0, "grows": 0, "waited_s": 0})", "no field \"preemptions\""},
      {R"("pool": {"trajectory": "bitwise", "shrinks": 0, "grows": 0, "preemptions": 0, "waited_s": -2})",
       "field \"waited_s\" = -2; expected seconds >= 0"},
  };
  for (const auto& [text, expected] : bad) {
    std::ofstream(tmp.sub("meta.json")) << head + ", " + text + "}";
    try {
      read_checkpoint_meta(tmp.str());
      FAIL() << "accepted " << text;
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("meta.json: field \"pool\""), std::string::npos) << e.what();
    }
  }
}

TEST(PoolRecord, TheStepsBeforeACheckpointCountWithThisProcesss) {
  PoolRecord before;
  before.bitwise = false;
  before.shrinks = 2;
  before.preemptions = 1;
  before.waited_s = 1.5;
  PoolRecord now;
  now.grows = 1;
  now.preemptions = 1;
  now.waited_s = 0.25;
  const PoolRecord r = now.after(before);
  // A micro-batch change before the checkpoint leaves the run within rounding for good.
  EXPECT_FALSE(r.bitwise);
  EXPECT_EQ(r.shrinks, 2);
  EXPECT_EQ(r.grows, 1);
  EXPECT_EQ(r.preemptions, 2);
  EXPECT_EQ(r.waited_s, 1.75);
  EXPECT_TRUE(PoolRecord{}.after(PoolRecord{}).bitwise);
  EXPECT_EQ(r.to_json().dump(),
            R"({"trajectory":"within_rounding","shrinks":2,"grows":1,"preemptions":2,"waited_s":1.75})");
}

TEST(Resume, NeverRefusesCheckpointsAndRequiredRefusesTheirAbsence) {
  testing::TempDir tmp;
  try {
    run(resumable_config("fp32", 3), tmp.sub("run"), ResumeMode::required);
    FAIL() << "started without a checkpoint";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--resume required: run directory " + tmp.sub("run") + " has no checkpoints"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(tmp.sub("run")));
  ASSERT_EQ(run(resumable_config("fp32", 3), tmp.sub("run")), 0);
  const std::string checkpoint = slurp(tmp.sub("run/checkpoints/step-00000003/model-tp00.safetensors"));
  try {
    run(resumable_config("fp32", 3), tmp.sub("run"), ResumeMode::never);
    FAIL() << "started over on top of checkpoints";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("has checkpoints (the newest of step 3)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(tmp.sub("run/checkpoints/step-00000003/model-tp00.safetensors")), checkpoint);
  // Resuming at the last step has nothing left to do, and changes nothing.
  ASSERT_EQ(run(resumable_config("fp32", 3), tmp.sub("run"), ResumeMode::required), 0);
  EXPECT_EQ(slurp(tmp.sub("run/checkpoints/step-00000003/model-tp00.safetensors")), checkpoint);
}

}  // namespace
}  // namespace memtrain::train
