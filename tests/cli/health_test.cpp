// Health checks end to end (Note [One rule for steps that cannot be taken], Note [Replicas are
// compared before their state spreads]): a NaN on one rank is skipped on every rank; a streak
// of them rolls back to the last checkpoint and the run ends on the clean run's state, bit for
// bit; a flipped parameter bit on one replica is caught by the consistency check and rolled
// back the same way; without a checkpoint, or past health.max_rollbacks, the run stops (exit 1).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/core/safetensors.hpp"
#include "tests/cli/checkpoint_config.hpp"
#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::checkpoint_config;
using testing::contains;
using testing::expect_same_state;
using testing::losses;
using testing::metrics_lines;
using testing::Scratch;
using testing::slurp;

std::string dp_config(const Scratch& s, const std::string& name, const std::string& health) {
  std::string text = slurp(checkpoint_config(s, name, 5, 2, health));
  text.replace(text.find("  global_batch_size: 2\n"), 23, "  global_batch_size: 4\n");
  return s.write(name, text);
}

TEST(Health, ANanOnOneRankIsSkippedOnEveryRank) {
  Scratch s;
  const std::string cfg = dp_config(s, "c.yaml", "health:\n  consistency_interval: 1\n");
  const auto r = s.mpirun(2, "train --config " + cfg + " --run-dir run", "MEMTRAIN_FAULT=nan_grad=3:1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "memtrain: step 3: inf/NaN gradients")) << r.out;
  EXPECT_FALSE(contains(r.out + r.err, "disagree"));  // both ranks skipped: replicas still equal
  for (const auto& l : metrics_lines(s, "run")) {
    if (!l.contains("loss") || !l.contains("step")) continue;
    EXPECT_EQ(l["skipped_steps"], l["step"].get<int>() >= 3 ? 1 : 0) << l.dump();
  }
  // AdamW took 4 of the 5 steps.
  const auto optim = core::read_safetensors(s.path("run/checkpoints/step-00000005/optimizer-tp00.safetensors"));
  EXPECT_EQ(core::to_doubles(optim.at("step")), std::vector<double>{4.0});
}

TEST(Health, AStreakOfNansRollsBackAndEndsOnTheCleanRunsState) {
  Scratch s;
  const std::string cfg = checkpoint_config(s, "c.yaml", 5, 2, "health:\n  max_consecutive_skips: 2\n");
  ASSERT_EQ(s.memtrain("train --config " + cfg + " --run-dir clean").exit_code, 0);
  const auto r = s.memtrain("train --config " + cfg + " --run-dir run", "MEMTRAIN_FAULT=nan_grad=3:0:2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "memtrain: health: step 4: gradients were inf/NaN in 2 consecutive steps")) << r.out;
  EXPECT_TRUE(
      contains(r.out, "rolled back to checkpoint run/checkpoints/step-00000002 (step 2, rollback 1 of at most 2)"));
  EXPECT_EQ(losses(s, "run"), losses(s, "clean"));  // steps 3 and 4 logged once: the clean reruns
  expect_same_state(s, "clean", "run", 5);
  int rolled = 0;
  for (const auto& l : metrics_lines(s, "run")) rolled += l.contains("rolled_back_to") ? 1 : 0;
  EXPECT_EQ(rolled, 1);
}

TEST(Health, AFlippedBitOnOneReplicaIsCaughtAndRolledBack) {
  Scratch s;
  const std::string cfg = dp_config(s, "c.yaml", "health:\n  consistency_interval: 1\n");
  ASSERT_EQ(s.mpirun(2, "train --config " + cfg + " --run-dir clean").exit_code, 0);
  const auto r = s.mpirun(2, "train --config " + cfg + " --run-dir run", "MEMTRAIN_FAULT=flip_param=3:1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "memtrain: health: step 3: the data-parallel replicas disagree: world rank 0 has XXH64 "))
      << r.out;
  EXPECT_TRUE(contains(r.out, "world rank 1 has XXH64 "));
  EXPECT_TRUE(contains(r.out, "rolled back to checkpoint run/checkpoints/step-00000002 (step 2"));
  EXPECT_EQ(losses(s, "run"), losses(s, "clean"));
  expect_same_state(s, "clean", "run", 5);
}

// Note [ECC counts through NVML, loaded at run time], with a stand-in NVML
// (tests/fixtures/fake_nvml) whose uncorrected count on rank 1 becomes 1 at its 4th read: the
// baseline at start, then the checks after steps 1, 2 and 3. So step 3 rolls back to step 2's
// checkpoint, and the run ends on the clean run's state.
std::string fake_nvml_mpirun(const std::string& rise, int ranks) {
  return std::string("MEMTRAIN_NVML_LIBRARY='") + FAKE_NVML_LIBRARY + "' FAKE_NVML_RISE=" + rise +
         " timeout -k 10 300 mpirun --oversubscribe" + (::geteuid() == 0 ? " --allow-run-as-root" : "") +
         " -x MEMTRAIN_NVML_LIBRARY -x FAKE_NVML_RISE -np " + std::to_string(ranks) + " '" + MEMTRAIN_BINARY_DIR +
         "/memtrain' ";
}

TEST(Health, ARiseInAGpusUncorrectedEccCountRollsBack) {
#ifndef MEMTRAIN_HAVE_CUDA
  GTEST_SKIP() << "a CPU-only build reads no ECC counts (they are read on builds with CUDA)";
#endif
  Scratch s;
  const std::string cfg = dp_config(s, "c.yaml", "health:\n  consistency_interval: 1\n");
  ASSERT_EQ(s.mpirun(2, "train --config " + cfg + " --run-dir clean").exit_code, 0);
  const auto r = s.shell(fake_nvml_mpirun("4:1", 2) + "train --config " + cfg + " --run-dir run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(
      r.out, "memtrain: health: GPU ECC counts read through NVML every 1 steps (2 of 2 ranks see ECC-capable GPUs)\n"))
      << r.out;
  EXPECT_TRUE(contains(r.out,
                       "memtrain: health: step 3: uncorrected ECC errors rose since step 2 on world rank 1 "
                       "(GPU 0: 0 -> 1); rolled back to checkpoint run/checkpoints/step-00000002 (step 2"))
      << r.out;
  EXPECT_EQ(losses(s, "run"), losses(s, "clean"));
  expect_same_state(s, "clean", "run", 5);
  // health.ecc_check: false reads nothing: no line, no rollback.
  const std::string off = dp_config(s, "off.yaml", "health:\n  consistency_interval: 1\n  ecc_check: false\n");
  const auto o = s.shell(fake_nvml_mpirun("2:0", 1) + "train --config " + off + " --run-dir off");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_FALSE(contains(o.out, "ECC")) << o.out;
  EXPECT_FALSE(contains(o.out, "rolled back")) << o.out;
}

TEST(Health, WithoutACheckpointOrPastMaxRollbacksTheRunStops) {
  Scratch s;
  const std::string none = checkpoint_config(s, "none.yaml", 5, 0, "health:\n  max_consecutive_skips: 2\n");
  const auto a = s.memtrain("train --config " + none + " --run-dir a", "MEMTRAIN_FAULT=nan_grad=2:0:2");
  EXPECT_EQ(a.exit_code, 1);
  EXPECT_TRUE(contains(a.err, "no checkpoint to roll back to (checkpoint.interval is 0)")) << a.err;
  const std::string some =
      checkpoint_config(s, "some.yaml", 5, 2, "health:\n  max_consecutive_skips: 2\n  max_rollbacks: 0\n");
  const auto b = s.memtrain("train --config " + some + " --run-dir b", "MEMTRAIN_FAULT=nan_grad=3:0:2");
  EXPECT_EQ(b.exit_code, 1);
  EXPECT_TRUE(contains(b.err, "stopping after 0 rollbacks (health.max_rollbacks)")) << b.err;
}

}  // namespace
}  // namespace memtrain::cli
