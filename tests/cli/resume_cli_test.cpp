// `memtrain train` resuming from checkpoints as a user meets it: after a SIGKILL at a step or
// inside a checkpoint write, past a corrupted newest checkpoint, under mpirun with dropout on,
// and onto fewer data-parallel ranks. The uninterrupted run is the reference: its losses and
// final checkpoint files, bit for bit (within float rounding when the batch is split
// differently).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/checkpoint_config.hpp"
#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

namespace fs = std::filesystem;
using testing::checkpoint_config;
using testing::contains;
using testing::expect_same_state;
using testing::losses;
using testing::Scratch;
using testing::slurp;

TEST(ResumeCli, AfterSigkillTheRunContinuesOntoTheUninterruptedTrajectory) {
  Scratch s;
  const std::string cfg = checkpoint_config(s, "c.yaml", 5, 2);
  ASSERT_EQ(s.memtrain("train --config " + cfg + " --run-dir straight").exit_code, 0);
  ASSERT_EQ(s.memtrain("train --config " + cfg + " --run-dir killed", "MEMTRAIN_FAULT=kill_at_step=3").exit_code, 137);
  const auto r = s.memtrain("train --config " + cfg + " --run-dir killed");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "memtrain: resumed from checkpoint killed/checkpoints/step-00000002 (step 2) in "));
  EXPECT_EQ(losses(s, "killed"), losses(s, "straight"));  // step 3 logged before the kill: once
  EXPECT_EQ(losses(s, "straight").size(), 5u);
  expect_same_state(s, "straight", "killed", 5);
}

// A checkpoint at or past max_steps leaves nothing to train: the run says so and changes
// nothing in metrics.jsonl.
TEST(ResumeCli, ACheckpointPastMaxStepsSaysThereIsNothingToTrain) {
  Scratch s;
  ASSERT_EQ(s.memtrain("train --config " + checkpoint_config(s, "c.yaml", 4, 2) + " --run-dir run").exit_code, 0);
  const auto before = losses(s, "run");
  const auto r = s.memtrain("train --config " + checkpoint_config(s, "d.yaml", 3, 2) + " --run-dir run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out,
                       "memtrain: the checkpoint's step 4 is at or past training.max_steps = 3: no steps to "
                       "train (raise training.max_steps to continue)"))
      << r.out;
  EXPECT_EQ(losses(s, "run"), before);
}

// Note [A checkpoint appears whole or not at all], then the resume: a kill halfway into the
// second checkpoint's bytes leaves the first, and the run continues from it.
TEST(ResumeCli, AfterAKillInsideACheckpointWriteThePreviousCheckpointIsResumed) {
  Scratch s;
  const std::string cfg = checkpoint_config(s, "c.yaml", 4, 2);
  ASSERT_EQ(s.memtrain("train --config " + cfg + " --run-dir straight").exit_code, 0);
  std::uintmax_t first = 0;
  for (const auto& e : fs::directory_iterator(s.path("straight/checkpoints/step-00000002")))
    first += fs::file_size(e.path());
  const auto killed = s.memtrain("train --config " + cfg + " --run-dir killed",
                                 "MEMTRAIN_FAULT=kill_in_checkpoint=" + std::to_string(first + first / 2));
  ASSERT_EQ(killed.exit_code, 137);
  const auto r = s.memtrain("train --config " + cfg + " --run-dir killed --resume required");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "resumed from checkpoint killed/checkpoints/step-00000002 (step 2)"));
  EXPECT_EQ(losses(s, "killed"), losses(s, "straight"));
  expect_same_state(s, "straight", "killed", 4);
}

TEST(ResumeCli, ACorruptedOrTruncatedNewestCheckpointIsSkippedWithAWarning) {
  Scratch s;
  const std::string cfg = checkpoint_config(s, "c.yaml", 4, 2);
  ASSERT_EQ(s.memtrain("train --config " + cfg + " --run-dir straight").exit_code, 0);
  for (const char* damage : {"flip", "truncate"}) {
    const std::string run = std::string(damage) + "ped";
    ASSERT_EQ(s.memtrain("train --config " + cfg + " --run-dir " + run).exit_code, 0);
    const std::string dir = run + "/checkpoints/step-00000004";
    if (std::string(damage) == "flip") {
      const std::string file = s.path(dir + "/model-tp00.safetensors");
      std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(fs::file_size(file) - 5));
      const char c = static_cast<char>(f.peek());
      f.put(static_cast<char>(c ^ 0x10));
    } else {
      fs::resize_file(s.path(dir + "/optimizer-tp00.safetensors"), 100);
    }
    EXPECT_EQ(s.memtrain("checkpoint verify " + dir).exit_code, 1) << damage;
    const auto r = s.memtrain("train --config " + cfg + " --run-dir " + run);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string file = std::string(damage) == "flip"
                                 ? "model-tp00.safetensors: XXH64 "
                                 : "optimizer-tp00.safetensors: 100 bytes, the manifest records ";
    EXPECT_TRUE(contains(r.err, "memtrain: warning: skipping checkpoint " + dir + ": " + file)) << damage;
    EXPECT_TRUE(contains(r.out, "resumed from checkpoint " + run + "/checkpoints/step-00000002 (step 2)")) << damage;
    EXPECT_EQ(losses(s, run), losses(s, "straight")) << damage;
    expect_same_state(s, "straight", run, 4);  // the damaged step 4 was written again
    EXPECT_EQ(s.memtrain("checkpoint verify " + dir).exit_code, 0) << damage;
  }
}

// Two data-parallel ranks with dropout on: SIGKILL on both, resume on both, bitwise. Then a
// dp = 2 checkpoint resumed by one rank: the same samples in one rank's two micro-batches, so
// the losses continue within float rounding.
TEST(ResumeCli, DataParallelResumeIsBitwiseAndFewerRanksStayWithinRounding) {
  Scratch s;
  std::string text = slurp(checkpoint_config(s, "dp.yaml", 4, 2));
  text.replace(text.find("  global_batch_size: 2\n"), 23, "  global_batch_size: 4\n");
  const std::string cfg = s.write("dp.yaml", text);
  const auto straight = s.mpirun(2, "train --config " + cfg + " --run-dir straight");
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  const auto killed = s.mpirun(2, "train --config " + cfg + " --run-dir killed", "MEMTRAIN_FAULT=kill_at_step=3");
  ASSERT_NE(killed.exit_code, 0);
  ASSERT_EQ(slurp(s.path("killed/checkpoints/latest")), "step-00000002\n");
  const auto resumed = s.mpirun(2, "train --config " + cfg + " --run-dir killed --resume required");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(losses(s, "killed"), losses(s, "straight"));
  expect_same_state(s, "straight", "killed", 4);
  // A refused resume under mpirun: every rank exits with the usage code.
  const auto refused = s.mpirun(2, "train --config " + cfg + " --run-dir killed --set training.seed=9");
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_TRUE(contains(refused.err, "training.seed: checkpoint 1234, now 9")) << refused.err;

  // The dp = 2 run stopped after step 2 (a checkpoint at its end), resumed by one process.
  std::string shorter = text;
  shorter.replace(shorter.find("  max_steps: 4\n"), 15, "  max_steps: 2\n");
  ASSERT_EQ(s.mpirun(2, "train --config " + s.write("short.yaml", shorter) + " --run-dir one").exit_code, 0);
  const auto one = s.memtrain("train --config " + cfg + " --run-dir one --resume required");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto expected = losses(s, "straight");
  const auto got = losses(s, "one");
  ASSERT_EQ(got.size(), 4u);
  for (long step = 1; step <= 4; ++step) {
    EXPECT_NEAR(got.at(step), expected.at(step), 1e-5 * std::fabs(expected.at(step))) << step;
  }
  EXPECT_TRUE(contains(slurp(s.path("one/metrics.jsonl")),
                       "\"resumed_from\":2,\"checkpoint\":\"one/checkpoints/step-00000002\","
                       "\"checkpoint_data_parallel_size\":2,\"data_parallel_size\":1}"));
}

// The micro-batch size cuts the same global batch into other pieces: a resume may change it,
// and the losses continue within float rounding (gradient accumulation sums in another order),
// as Megatron-LM lets a resumed run change --micro-batch-size.
TEST(ResumeCli, AnotherMicroBatchSizeContinuesWithinRounding) {
  Scratch s;
  std::string text = slurp(checkpoint_config(s, "c.yaml", 4, 2));
  text.replace(text.find("  global_batch_size: 2\n"), 23, "  global_batch_size: 4\n");
  const std::string cfg = s.write("c.yaml", text);
  ASSERT_EQ(s.memtrain("train --config " + cfg + " --run-dir straight").exit_code, 0);
  std::string shorter = text;
  shorter.replace(shorter.find("  max_steps: 4\n"), 15, "  max_steps: 2\n");
  const std::string short_cfg = s.write("short.yaml", shorter);
  const auto expected = losses(s, "straight");
  ASSERT_EQ(expected.size(), 4u);
  for (const char* micro : {"1", "4"}) {
    const std::string run = std::string("micro") + micro;
    ASSERT_EQ(s.memtrain("train --config " + short_cfg + " --run-dir " + run).exit_code, 0);
    const auto r = s.memtrain("train --config " + cfg + " --run-dir " + run +
                              " --resume required --set training.micro_batch_size=" + micro);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto got = losses(s, run);
    ASSERT_EQ(got.size(), 4u) << run;
    for (long step = 3; step <= 4; ++step) {
      EXPECT_NEAR(got.at(step), expected.at(step), 1e-5 * std::fabs(expected.at(step))) << run << " step " << step;
    }
  }
}

TEST(ResumeCli, BadResumeRequestsAreUsageErrors) {
  Scratch s;
  const std::string cfg = checkpoint_config(s, "c.yaml", 2, 2);
  const auto bad = s.memtrain("train --config " + cfg + " --run-dir run --resume sometimes");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(contains(bad.err, "--resume sometimes: expected auto, required or never")) << bad.err;
  EXPECT_FALSE(fs::exists(s.path("run")));
  const auto none = s.memtrain("train --config " + cfg + " --run-dir run --resume required");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_TRUE(contains(none.err, "--resume required: run directory run has no checkpoints")) << none.err;
  const auto nowhere = s.memtrain("train --config " + cfg + " --resume required");
  EXPECT_EQ(nowhere.exit_code, 2);
  EXPECT_TRUE(contains(nowhere.err, "--resume required needs --run-dir DIR")) << nowhere.err;
  ASSERT_EQ(s.memtrain("train --config " + cfg + " --run-dir run").exit_code, 0);
  const auto never = s.memtrain("train --config " + cfg + " --run-dir run --resume never");
  EXPECT_EQ(never.exit_code, 2);
  EXPECT_TRUE(contains(never.err, "run directory run has checkpoints (the newest of step 2)")) << never.err;
  const auto changed = s.memtrain("train --config " + cfg + " --run-dir run --set training.lr=0.5");
  EXPECT_EQ(changed.exit_code, 2);
  EXPECT_TRUE(contains(changed.err, "\n  training.lr: checkpoint 0.0001, now 0.5\n")) << changed.err;
}

}  // namespace
}  // namespace memtrain::cli
