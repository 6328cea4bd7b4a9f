// `memtrain supervise` (Note [Which exits the supervisor restarts]): a job whose rank was
// killed is relaunched with --resume and ends on the uninterrupted run's state; exits a restart
// cannot help are returned at once; restarts stop at --max-restarts; usage errors exit 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <string>

#include "tests/cli/checkpoint_config.hpp"
#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::checkpoint_config;
using testing::contains;
using testing::expect_same_state;
using testing::losses;
using testing::Scratch;
using testing::slurp;

std::string binary() { return std::string(MEMTRAIN_BINARY_DIR) + "/memtrain"; }
std::string mpirun(int ranks) {
  return std::string("mpirun --oversubscribe") + (::geteuid() == 0 ? " --allow-run-as-root" : "") +
         " -x MEMTRAIN_FAULT -np " + std::to_string(ranks) + " '" + binary() + "'";
}

// Two data-parallel ranks, global batch 4, four steps, a checkpoint every two.
std::string dp_config(const Scratch& s) {
  std::string text = slurp(checkpoint_config(s, "dp.yaml", 4, 2));
  text.replace(text.find("  global_batch_size: 2\n"), 23, "  global_batch_size: 4\n");
  return s.write("dp.yaml", text);
}

TEST(Supervise, AJobWhoseRankWasKilledIsRelaunchedAndEndsOnTheUninterruptedState) {
  Scratch s;
  const std::string cfg = dp_config(s);
  ASSERT_EQ(s.shell("MEMTRAIN_FAULT= timeout 300 " + mpirun(2) + " train --config " + cfg + " --run-dir straight")
                .exit_code, 0);
  // Rank 1 dies after step 3; step 2's checkpoint is on disk.
  const auto r = s.shell("MEMTRAIN_FAULT=kill_at_step=3:1 timeout 600 '" + binary() +
                         "' supervise --max-restarts 2 --backoff 0 -- " + mpirun(2) + " train --config " + cfg +
                         " --run-dir run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain supervise: exit ")) << r.err;
  EXPECT_TRUE(contains(r.err, "; restart 1 of 2 in 0 s: ")) << r.err;
  EXPECT_TRUE(contains(r.err, " --run-dir run --resume required\n")) << r.err;
  EXPECT_FALSE(contains(r.err, "restart 2 of 2")) << r.err;
  EXPECT_TRUE(contains(r.out, "resumed from checkpoint run/checkpoints/step-00000002 (step 2)"));
  EXPECT_EQ(losses(s, "run"), losses(s, "straight"));
  expect_same_state(s, "straight", "run", 4);
}

// Migration onto fewer ranks: the relaunch runs one process, on the same trajectory within
// float rounding (the global batch split differently).
TEST(Supervise, MinRanksRelaunchesOntoFewerRanks) {
  Scratch s;
  const std::string cfg = dp_config(s);
  ASSERT_EQ(s.shell("MEMTRAIN_FAULT= timeout 300 " + mpirun(2) + " train --config " + cfg + " --run-dir straight")
                .exit_code, 0);
  const auto r = s.shell("MEMTRAIN_FAULT=kill_at_step=3:0 timeout 600 '" + binary() +
                         "' supervise --backoff 0 --min-ranks 1 -- " + mpirun(2) + " train --config " + cfg +
                         " --run-dir run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, " -np 1 ")) << r.err;
  const auto expected = losses(s, "straight");
  const auto got = losses(s, "run");
  ASSERT_EQ(got.size(), 4u);
  for (long step = 1; step <= 4; ++step) {
    EXPECT_NEAR(got.at(step), expected.at(step), 1e-5 * std::fabs(expected.at(step))) << step;
  }
}

TEST(Supervise, ExitsARestartCannotHelpAreReturnedAtOnce) {
  Scratch s;
  for (const int code : {0, 2, 130, 138, 143}) {
    const auto r = s.memtrain("supervise --backoff 0 -- sh -c 'exit " + std::to_string(code) + "' sh --run-dir x");
    EXPECT_EQ(r.exit_code, code);
    EXPECT_FALSE(contains(r.err, "restart 1")) << code << r.err;
  }
}

TEST(Supervise, GivesUpAfterMaxRestarts) {
  Scratch s;
  const auto r = s.memtrain("supervise --max-restarts 2 --backoff 0 -- sh -c 'exit 1' sh --run-dir x");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "restart 1 of 2 in 0 s: sh -c exit 1 sh --run-dir x --resume auto\n")) << r.err;
  EXPECT_TRUE(contains(r.err, "restart 2 of 2")) << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain supervise: exit 1; giving up after 2 restarts\n")) << r.err;
}

TEST(Supervise, UsageErrorsExit2) {
  Scratch s;
  const auto no_dir = s.memtrain("supervise -- sh -c 'exit 1'");
  EXPECT_EQ(no_dir.exit_code, 2);
  EXPECT_TRUE(contains(no_dir.err, "the command names no --run-dir")) << no_dir.err;
  const auto no_command = s.memtrain("supervise --max-restarts 1");
  EXPECT_EQ(no_command.exit_code, 2);
  const auto no_np = s.memtrain("supervise --min-ranks 1 -- sh -c 'exit 1' sh --run-dir x");
  EXPECT_EQ(no_np.exit_code, 2);
  EXPECT_TRUE(contains(no_np.err, "the command has no -np N to replace")) << no_np.err;
  const auto zero = s.memtrain("supervise --min-ranks 0 -- sh -c 'exit 1' sh --run-dir x");
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_TRUE(contains(zero.err, "--min-ranks")) << zero.err;
  // A fault on a rank the job does not have is refused before training (exit 2), not ignored.
  const auto fault = s.memtrain("train --config " + s.write("c.yaml", testing::kTinyMockYaml) + " --run-dir f",
                                "MEMTRAIN_FAULT=nan_grad=1:3");
  EXPECT_EQ(fault.exit_code, 2);
  EXPECT_TRUE(contains(fault.err, "MEMTRAIN_FAULT: nan_grad names rank 3; the job has ranks 0..0")) << fault.err;
  const auto missing = s.memtrain("supervise -- /nonexistent/job --run-dir x");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(contains(missing.err, "cannot start /nonexistent/job")) << missing.err;
}

}  // namespace
}  // namespace memtrain::cli
