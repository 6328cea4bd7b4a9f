// `memtrain supervise` (Note [Which exits the supervisor restarts]): a job whose rank was
// killed is relaunched with --resume and ends on the uninterrupted run's state; exits a restart
// cannot help are returned at once; restarts stop at --max-restarts; usage errors exit 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
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
  ASSERT_EQ(
      s.shell("MEMTRAIN_FAULT= timeout 300 " + mpirun(2) + " train --config " + cfg + " --run-dir straight").exit_code,
      0);
  // Rank 1 dies after step 3; step 2's checkpoint is on disk.
  const auto r =
      s.shell("MEMTRAIN_FAULT=kill_at_step=3:1 timeout 600 '" + binary() +
              "' supervise --max-restarts 2 --backoff 0 -- " + mpirun(2) + " train --config " + cfg + " --run-dir run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain supervise: exit ")) << r.err;
  EXPECT_TRUE(contains(r.err, "; restart 1 of 2 in 0 s: ")) << r.err;
  EXPECT_TRUE(contains(r.err, " --run-dir run --resume required\n")) << r.err;
  EXPECT_FALSE(contains(r.err, "restart 2 of 2")) << r.err;
  EXPECT_TRUE(contains(r.out, "resumed from checkpoint run/checkpoints/step-00000002 (step 2)"));
  EXPECT_EQ(losses(s, "run"), losses(s, "straight"));
  expect_same_state(s, "straight", "run", 4);
}

// Note [SIGTERM reaches the job as SIGUSR1]: a SIGTERM to the supervisor stops the job after a
// step with its checkpoint written, the supervisor returns only once the ranks are gone, and
// it exits 143.
TEST(Supervise, SigtermStopsTheJobCleanlyAndWaitsForItsRanks) {
  Scratch s;
  const std::string cfg = s.write("c.yaml", std::string(testing::kTinyMockYaml) + "checkpoint:\n  interval: 1000000\n");
  const std::string run = "run-term-" + std::to_string(::getpid());
  const auto r = s.shell("true; { '" + binary() + "' supervise --backoff 0 -- " + mpirun(2) + " train --config " + cfg +
                         " --set training.max_steps=1000000 --set training.lr_decay_steps=1000000"
                         " --set training.global_batch_size=4 --set training.log_interval=1 --run-dir " +
                         run + " & sup=$!; for i in $(seq 1200); do [ -s " + run +
                         "/metrics.jsonl ] && break; sleep 0.1; done; kill -TERM $sup; wait $sup; rc=$?;"
                         " left=$(ps -eo args | grep -c '^" +
                         binary() + " train .*run-te[r]m-" + std::to_string(::getpid()) +
                         "'); echo \"left $left\"; exit $rc; }");  // ranks' command lines only, not this shell's
  EXPECT_EQ(r.exit_code, 143) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain supervise: stopped by Terminated (forwarded to the job as SIGUSR1")) << r.err;
  EXPECT_TRUE(contains(r.err, "exit 138 (User defined signal 1), not restarted")) << r.err;
  EXPECT_TRUE(contains(r.out, "left 0")) << r.out;
  EXPECT_TRUE(std::filesystem::exists(s.path(run + "/checkpoints/latest"))) << "no checkpoint of the stop";
}

// A Ctrl-C to `supervise -- mpirun ...` is 130, as with one rank (mpirun itself exits 1 when
// its ranks stop on SIGINT, which a scheduler would take for a crash), and the supervisor
// returns only once the ranks are gone (Note [The supervisor returns when the job is gone]).
TEST(Supervise, SigintStopsTheJobAndExits130AfterItsRanks) {
  Scratch s;
  const std::string cfg = s.write("c.yaml", std::string(testing::kTinyMockYaml) + "checkpoint:\n  interval: 1000000\n");
  const std::string run = "run-int-" + std::to_string(::getpid());
  const auto r =
      s.shell("true; { '" + binary() + "' supervise --backoff 0 -- " + mpirun(2) + " train --config " + cfg +
              " --set training.max_steps=1000000 --set training.lr_decay_steps=1000000"
              " --set training.global_batch_size=4 --set training.log_interval=1 --run-dir " +
              run + " & sup=$!; for i in $(seq 1200); do [ -s " + run +
              "/metrics.jsonl ] && break; sleep 0.1; done; kill -INT $sup; wait $sup; rc=$?;"
              " left=$(ps -eo args | grep -c '^" +
              binary() + " train .*run-in[t]-" + std::to_string(::getpid()) + "'); echo \"left $left\"; exit $rc; }");
  EXPECT_EQ(r.exit_code, 130) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain supervise: stopped by Interrupt (forwarded to the job)")) << r.err;
  EXPECT_TRUE(contains(r.out, "left 0")) << r.out;
}

// A stop signal during the backoff ends it at once: no relaunch, and the supervisor exits as
// the signal asks (143 for SIGTERM).
TEST(Supervise, ASignalDuringTheBackoffStopsWithoutARelaunch) {
  Scratch s;
  const std::string cfg = checkpoint_config(s, "c.yaml", 4, 2);
  // The supervisor's stderr goes to .err, watched for its first restart line, then shown.
  const auto r = s.shell("true; { { MEMTRAIN_FAULT=kill_at_step=3 '" + binary() + "' supervise --backoff 600 -- '" +
                         binary() + "' train --config " + cfg +
                         " --run-dir run & sup=$!;"
                         " for i in $(seq 1200); do grep -q 'restart 1 of' .err 2>/dev/null && break; sleep 0.1; done;"
                         " kill -TERM $sup; wait $sup; } 2>.err; rc=$?; cat .err >&2; exit $rc; }");
  EXPECT_EQ(r.exit_code, 143) << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain supervise: exit 137 (Killed); restart 1 of 3 in 600 s")) << r.err;
  EXPECT_TRUE(contains(r.err,
                       "memtrain supervise: stopped by Terminated during the backoff after exit 137 (Killed), "
                       "not restarted"))
      << r.err;
}

// Note [A relaunch onto fewer ranks must be able to start]: what a relaunch onto --min-ranks
// ranks would refuse is refused at start (exit 2, nothing run), not after the first failure.
TEST(Supervise, MinRanksThatTheConfigCannotRunOnAreRefusedAtStart) {
  Scratch s;
  const std::string cfg = dp_config(s);
  const auto refused = [&](const std::string& sets, int min_ranks, int ranks = 2) {
    const auto r =
        s.shell("timeout 120 '" + binary() + "' supervise --backoff 0 --min-ranks " + std::to_string(min_ranks) +
                " -- " + mpirun(ranks) + " train --config " + cfg + sets + " --run-dir run");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_FALSE(std::filesystem::exists(s.path("run"))) << "the job ran";
    return r.err;
  };
  EXPECT_TRUE(contains(refused(" --set parallel.tensor_model_parallel_size=2", 1),
                       "memtrain supervise --min-ranks 1: a relaunch onto 1 rank could not start: --set "
                       "parallel.tensor_model_parallel_size=2: parallel.tensor_model_parallel_size = 2: does not "
                       "divide the world of 1 rank"));
  // Global batch 8 splits over 4 ranks of micro-batch 2, not over 3.
  EXPECT_TRUE(contains(refused(" --set training.global_batch_size=8", 3, 4),
                       "memtrain supervise --min-ranks 3: a relaunch onto 3 ranks could not start: --set "
                       "training.global_batch_size=8: training.global_batch_size = 8: not a multiple of "
                       "training.micro_batch_size x data-parallel size = 2 x 3 = 6"));
  EXPECT_TRUE(contains(refused(" --set compression.method=powersgd", 1),
                       "keeps per-rank state that resumes only on the checkpoint's data-parallel size; expected no "
                       "--min-ranks for such a job"));
}

// Migration onto fewer ranks: the relaunch runs one process, on the same trajectory within
// float rounding (the global batch split differently).
TEST(Supervise, MinRanksRelaunchesOntoFewerRanks) {
  Scratch s;
  const std::string cfg = dp_config(s);
  ASSERT_EQ(
      s.shell("MEMTRAIN_FAULT= timeout 300 " + mpirun(2) + " train --config " + cfg + " --run-dir straight").exit_code,
      0);
  const auto r =
      s.shell("MEMTRAIN_FAULT=kill_at_step=3:0 timeout 600 '" + binary() + "' supervise --backoff 0 --min-ranks 1 -- " +
              mpirun(2) + " train --config " + cfg + " --run-dir run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, " -np 1 ")) << r.err;
  const auto expected = losses(s, "straight");
  const auto got = losses(s, "run");
  ASSERT_EQ(got.size(), 4u);
  for (long step = 1; step <= 4; ++step) {
    EXPECT_NEAR(got.at(step), expected.at(step), 1e-5 * std::fabs(expected.at(step))) << step;
  }
}

// Migration away from a host (Note [Leaving a host out of a relaunch]): two "hosts" that are
// both this machine, rank 1 killed, the relaunch runs on the one left with one rank and
// continues the two-rank trajectory within float rounding.
TEST(Supervise, ExcludeHostRelaunchesWithoutThatHost) {
  Scratch s;
  const std::string cfg = dp_config(s);
  ASSERT_EQ(
      s.shell("MEMTRAIN_FAULT= timeout 300 " + mpirun(2) + " train --config " + cfg + " --run-dir straight").exit_code,
      0);
  const std::string launcher = std::string("mpirun --oversubscribe") +
                               (::geteuid() == 0 ? " --allow-run-as-root" : "") +
                               " -x MEMTRAIN_FAULT -np 2 --host localhost:1,127.0.0.1:1 '" + binary() + "'";
  const auto r = s.shell("MEMTRAIN_FAULT=kill_at_step=3:1 timeout 600 '" + binary() +
                         "' supervise --backoff 0 --exclude-host 127.0.0.1 -- " + launcher + " train --config " + cfg +
                         " --run-dir run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, " -np 1 --host localhost:1 ")) << r.err;
  EXPECT_TRUE(contains(r.out, "resumed from checkpoint run/checkpoints/step-00000002 (step 2)")) << r.out;
  const auto expected = losses(s, "straight");
  const auto got = losses(s, "run");
  ASSERT_EQ(got.size(), 4u);
  for (long step = 1; step <= 4; ++step) {
    EXPECT_NEAR(got.at(step), expected.at(step), 1e-5 * std::fabs(expected.at(step))) << step;
  }
}

// The relaunch command, read from the supervisor's log, for a job that always fails.
std::string relaunch_of(const Scratch& s, const std::string& options, const std::string& job_args) {
  const auto r = s.memtrain("supervise --max-restarts 1 --backoff 0 " + options + " -- sh -c 'exit 1' sh " + job_args +
                            " --run-dir x");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const std::string mark = "restart 1 of 1 in 0 s: ";
  const auto at = r.err.find(mark);
  if (at == std::string::npos) return "(no relaunch) " + r.err;
  return r.err.substr(at + mark.size(), r.err.find('\n', at) - at - mark.size());
}

TEST(Supervise, ExcludeHostEditsTheHostListAndTheRankCount) {
  Scratch s;
  EXPECT_EQ(relaunch_of(s, "--exclude-host b", "-np 4 --host a:2,b:2"),
            "sh -c exit 1 sh -np 2 --host a:2 --run-dir x --resume auto");
  // Hosts without slots count one each; two exclusions; --host= form; fewer ranks than slots stay.
  EXPECT_EQ(relaunch_of(s, "--exclude-host b --exclude-host d", "-np 4 --host=a,b,c,d"),
            "sh -c exit 1 sh -np 2 --host=a:1,c:1 --run-dir x --resume auto");
  EXPECT_EQ(relaunch_of(s, "--exclude-host b", "-np 2 -H a:4,b:4"),
            "sh -c exit 1 sh -np 2 -H a:4 --run-dir x --resume auto");
  // --min-ranks sets the count itself.
  EXPECT_EQ(relaunch_of(s, "--exclude-host b --min-ranks 1", "-np 4 --host a:2,b:2"),
            "sh -c exit 1 sh -np 1 --host a:2 --run-dir x --resume auto");
}

TEST(Supervise, ExcludeHostWritesAFilteredCopyOfTheHostfile) {
  Scratch s;
  const std::string original = "# two nodes\na slots=2\nb slots=2 max_slots=4\n\nc slots=1\n";
  const std::string hosts = s.write("hosts.txt", original);
  EXPECT_EQ(relaunch_of(s, "--exclude-host b", "-np 5 --hostfile " + hosts),
            "sh -c exit 1 sh -np 3 --hostfile x.hostfile --run-dir x --resume auto");
  EXPECT_EQ(slurp(s.path("x.hostfile")), "# two nodes\na slots=2\n\nc slots=1\n");
  EXPECT_EQ(slurp(hosts), original);
  // A line that leaves its slots to mpirun: the rank count cannot be known and stays.
  const std::string open = s.write("open.txt", "a\nb slots=2\n");
  EXPECT_EQ(relaunch_of(s, "--exclude-host b", "-np 5 --machinefile " + open),
            "sh -c exit 1 sh -np 5 --machinefile x.hostfile --run-dir x --resume auto");
  EXPECT_EQ(slurp(s.path("x.hostfile")), "a\n");
  // A hostfile that already has the copy's name is left as it is; the copy goes beside it.
  const std::string own = s.write("x.hostfile", original);
  EXPECT_EQ(relaunch_of(s, "--exclude-host b", "-np 5 --hostfile " + own),
            "sh -c exit 1 sh -np 3 --hostfile x.hostfile.excluded --run-dir x --resume auto");
  EXPECT_EQ(slurp(own), original);
  EXPECT_EQ(slurp(s.path("x.hostfile.excluded")), "# two nodes\na slots=2\n\nc slots=1\n");
}

TEST(Supervise, ExcludeHostRefusesWhatItCannotDo) {
  Scratch s;
  const auto missing = s.memtrain("supervise --exclude-host c -- sh -c 'exit 1' sh -np 4 --host a:2,b:2 --run-dir x");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_TRUE(contains(missing.err, "--exclude-host c: no such host in the command (its hosts: a, b)")) << missing.err;
  const auto no_hosts = s.memtrain("supervise --exclude-host a -- sh -c 'exit 1' sh -np 4 --run-dir x");
  EXPECT_EQ(no_hosts.exit_code, 2);
  EXPECT_TRUE(contains(no_hosts.err, "the command has no --host list or --hostfile")) << no_hosts.err;
  const auto none_left = s.memtrain("supervise --exclude-host a -- sh -c 'exit 1' sh --host a:2 --run-dir x");
  EXPECT_EQ(none_left.exit_code, 2);
  EXPECT_TRUE(contains(none_left.err, "no host would be left to relaunch on")) << none_left.err;
  const auto bad_slots = s.memtrain("supervise --exclude-host b -- sh -c 'exit 1' sh --host a:two,b --run-dir x");
  EXPECT_EQ(bad_slots.exit_code, 2);
  EXPECT_TRUE(contains(bad_slots.err, "slots 'two' is not a positive integer")) << bad_slots.err;
  const auto no_file = s.memtrain("supervise --exclude-host b -- sh -c 'exit 1' sh --hostfile nowhere.txt --run-dir x");
  EXPECT_EQ(no_file.exit_code, 2);
  EXPECT_TRUE(contains(no_file.err, "cannot read the hostfile nowhere.txt")) << no_file.err;
  // Refused before the job ran: nothing was launched, no copy written.
  EXPECT_FALSE(std::filesystem::exists(s.path("x.hostfile")));
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
  // NaN passes every comparison, and a wait past ~292 years overflows sleep_for into no wait:
  // both are refused before the job runs.
  for (const std::string backoff : {"nan", "-1", "1e300", "inf", "3601"}) {
    const auto r = s.memtrain("supervise --backoff " + backoff + " -- sh -c 'exit 1' sh --run-dir x");
    EXPECT_EQ(r.exit_code, 2) << backoff;
    EXPECT_TRUE(contains(r.err, ": expected a number of seconds in [0, 3600]\n")) << backoff << r.err;
    EXPECT_FALSE(contains(r.err, "restart 1")) << backoff << r.err;
  }
  // More ranks than launched would only fail at the first relaunch, after a crash.
  const auto more = s.memtrain("supervise --min-ranks 3 -- sh -c 'exit 1' sh -np 2 --run-dir x");
  EXPECT_EQ(more.exit_code, 2);
  EXPECT_TRUE(
      contains(more.err, "--min-ranks 3: more than the 2 ranks the command launches (-np 2); expected at most 2"))
      << more.err;
  EXPECT_FALSE(contains(more.err, "restart 1")) << more.err;
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
