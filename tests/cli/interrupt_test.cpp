// Stopping a run from outside, as a user does: SIGINT (Ctrl-C) to a running `memtrain train`
// (exit 130), SIGTERM to it (exit 143), SIGUSR1 to `mpirun -np 2` running it (mpirun forwards it;
// exit 138), and Ctrl-C in mpirun's terminal (SIGINT to its process group). The first three
// print the summary and write metrics.jsonl up to the step that was running when the signal
// came, and no later (Note [SIGINT stops after the current step]).
//
// Under mpirun a Ctrl-C never reaches the ranks as SIGINT: Open MPI 4.1 starts each rank in a
// process group of its own, answers the SIGINT by sending the ranks SIGTERM, stops forwarding
// their output and kills them odls_base_sigkill_timeout (1 s) later; mpirun exits 1 whatever
// the ranks return (a rank script that exits 130 on SIGTERM gives 1 too). So that case checks
// what memtrain controls: the job ends, no rank is left running, and every line of
// metrics.jsonl is whole, its steps contiguous.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::kTinyMockYaml;
using testing::Scratch;
using testing::slurp;

// The last training step in metrics.jsonl (0 when there is none yet), reading whole lines only.
std::int64_t last_training_step(const std::string& path) {
  std::ifstream in(path);
  std::int64_t last = 0;
  for (std::string line; std::getline(in, line);) {
    if (in.eof()) break;  // a line still being written has no newline yet
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("loss")) last = j["step"].get<std::int64_t>();
  }
  return last;
}

// A child in its own process group running `argv` in the scratch directory, stdout and stderr
// to files there.
pid_t spawn(const Scratch& s, const std::vector<std::string>& argv) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::setpgid(0, 0);
  if (::chdir(s.path("").c_str()) != 0) ::_exit(120);
  const int out = ::open(s.path(".stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err = ::open(s.path(".stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ::dup2(out, 1);
  ::dup2(err, 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  ::_exit(121);
}

// waitpid with a deadline: the exit code, or -1 after killing a child that did not stop.
int wait_with_deadline(pid_t pid, std::chrono::seconds deadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  int status = 0;
  while (std::chrono::steady_clock::now() < until) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(-pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

struct Interrupted {
  int exit_code = -1;
  std::int64_t seen_before = 0;  // last logged step just before the signal
  std::int64_t seen_after = 0;   // last logged step just after it
  std::int64_t final_step = 0;   // last logged step when the run ended
  std::string out, err;
};

// Starts argv, waits until 3 training lines are logged, sends `sig` to the child (or to its
// process group) and waits for the end.
Interrupted interrupt_run(const Scratch& s, const std::vector<std::string>& argv, int sig, bool group) {
  const std::string metrics = s.path("run/metrics.jsonl");
  const pid_t pid = spawn(s, argv);
  Interrupted r;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (last_training_step(metrics) < 3 && std::chrono::steady_clock::now() < until) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {  // ended before it could be interrupted
      r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      r.err = slurp(s.path(".stderr"));
      return r;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.seen_before = last_training_step(metrics);
  ::kill(group ? -pid : pid, sig);
  r.seen_after = last_training_step(metrics);
  r.exit_code = wait_with_deadline(pid, std::chrono::seconds(120));
  r.final_step = last_training_step(metrics);
  r.out = slurp(s.path(".stdout"));
  r.err = slurp(s.path(".stderr"));
  return r;
}

// The last line of metrics.jsonl: the final evaluation, at the step the run stopped after.
nlohmann::json last_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) last = line;
  return nlohmann::json::parse(last, nullptr, /*allow_exceptions=*/false);
}

// The trainer writes step k's line before it votes on a stop signal after step k, so the step
// that was running when the signal came (the first whose vote follows it) is at least the last
// line seen before the signal, and at most one past the last line seen after it.
void expect_clean_stop(const Scratch& s, const Interrupted& r, const std::string& signal_name,
                       bool signal_reached_the_process_directly) {
  ASSERT_NE(r.exit_code, -1) << "the run did not end within 120 s of the signal";
  EXPECT_TRUE(contains(r.out, "Summary")) << r.out;
  EXPECT_TRUE(contains(r.out, "(stopped by " + signal_name + ")")) << r.out;
  EXPECT_GE(r.final_step, r.seen_before) << "metrics lost a logged step";
  if (signal_reached_the_process_directly) {
    EXPECT_LE(r.final_step, r.seen_after + 1) << "steps ran after the signal";
  }
  const auto eval = last_line(s.path("run/metrics.jsonl"));
  ASSERT_TRUE(eval.is_object() && eval.contains("eval_loss")) << eval.dump();
  EXPECT_EQ(eval["step"].get<std::int64_t>(), r.final_step) << "nothing ran after the last step";
}

std::vector<std::string> train_args(const std::string& binary) {
  return {binary,      "train",
          "--config",  "exp.yaml",
          "--run-dir", "run",
          "--set",     "training.max_steps=1000000",
          "--set",     "training.log_interval=1",
          "--set",     "training.eval_interval=1000000"};
}

const std::string kBinary = std::string(MEMTRAIN_BINARY_DIR) + "/memtrain";

TEST(Interrupt, SigintStopsTrainAfterTheStepInProgressWithExit130) {
  Scratch s;
  s.write("exp.yaml", kTinyMockYaml);
  const auto r = interrupt_run(s, train_args(kBinary), SIGINT, /*group=*/false);
  EXPECT_EQ(r.exit_code, 130) << r.err;
  expect_clean_stop(s, r, "SIGINT", true);
}

TEST(Interrupt, SigtermStopsTrainAfterTheStepInProgressWithExit143) {
  Scratch s;
  s.write("exp.yaml", kTinyMockYaml);
  const auto r = interrupt_run(s, train_args(kBinary), SIGTERM, /*group=*/false);
  EXPECT_EQ(r.exit_code, 143) << r.err;
  expect_clean_stop(s, r, "SIGTERM", true);
}

// Processes whose working directory is `dir` (this test's scratch directory: only its ranks).
// With checkpointing on, SIGTERM saves the step it stopped after; SIGINT does not unless
// checkpoint.on_interrupt (docs/checkpoints.md). interval 1000000: no save but the stop's.
std::vector<std::string> with_checkpoints(std::vector<std::string> args, bool on_interrupt) {
  for (const char* a : {"--set", "checkpoint.interval=1000000", "--set"}) args.push_back(a);
  args.push_back(std::string("checkpoint.on_interrupt=") + (on_interrupt ? "true" : "false"));
  return args;
}

TEST(Interrupt, SigtermSavesACheckpointOfTheStepItStoppedAfter) {
  Scratch s;
  s.write("exp.yaml", kTinyMockYaml);
  const auto r = interrupt_run(s, with_checkpoints(train_args(kBinary), false), SIGTERM, false);
  EXPECT_EQ(r.exit_code, 143) << r.err;
  expect_clean_stop(s, r, "SIGTERM", true);
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(r.final_step));
  EXPECT_EQ(slurp(s.path("run/checkpoints/latest")), std::string(name) + "\n");
  const auto meta =
      nlohmann::json::parse(slurp(s.path("run/checkpoints/" + std::string(name) + "/meta.json")), nullptr, false);
  ASSERT_TRUE(meta.is_object());
  EXPECT_EQ(meta["step"].get<std::int64_t>(), r.final_step);
}

TEST(Interrupt, SigintSavesACheckpointOnlyWithOnInterrupt) {
  for (const bool on_interrupt : {false, true}) {
    Scratch s;
    s.write("exp.yaml", kTinyMockYaml);
    const auto r = interrupt_run(s, with_checkpoints(train_args(kBinary), on_interrupt), SIGINT, false);
    EXPECT_EQ(r.exit_code, 130) << r.err;
    EXPECT_EQ(std::filesystem::exists(s.path("run/checkpoints/latest")), on_interrupt) << on_interrupt;
  }
}

int processes_in(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path wanted = fs::weakly_canonical(dir);
  int n = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const fs::path cwd = fs::read_symlink(entry.path() / "cwd", ec);
    if (!ec && cwd == wanted) ++n;
  }
  return n;
}

std::vector<std::string> mpirun_args(const std::string& binary) {
  std::vector<std::string> argv{"mpirun", "--oversubscribe", "--allow-run-as-root", "-np", "2"};
  for (const auto& a : train_args(binary)) argv.push_back(a);
  // Micro-batch 2 per rank: the global batch of 2 ranks is 4.
  argv.insert(argv.end(), {"--set", "training.global_batch_size=4"});
  return argv;
}

TEST(Interrupt, SigusrOneToMpirunStopsBothRanksAfterTheSameStepWithExit138) {
  ASSERT_EQ(std::system("command -v mpirun >/dev/null 2>&1"), 0) << "mpirun not found (openmpi-bin)";
  Scratch s;
  s.write("exp.yaml", kTinyMockYaml);
  const auto r = interrupt_run(s, mpirun_args(kBinary), SIGUSR1, /*group=*/false);
  EXPECT_EQ(r.exit_code, 138) << r.err;  // mpirun exits with the ranks' code
  // mpirun forwards the signal some time after it got it: only the lower bound holds.
  expect_clean_stop(s, r, "SIGUSR1", false);
}

// A Ctrl-C reaches mpirun only; it sends the ranks SIGTERM and stops reading their output, so
// rank 0 may be blocked writing its progress line (Note [SIGTERM interrupts a blocked write]).
// The ranks must still stop after the same step and write the final evaluation and the memory
// snapshot. A grace of 10 s instead of Open MPI's 1 s keeps a loaded machine from turning that
// into a race; what is checked is that nothing hangs and nothing is lost.
TEST(Interrupt, CtrlCToMpirunEndsTheJobWithWholeMetricsAndTheFinalEvaluation) {
  ASSERT_EQ(std::system("command -v mpirun >/dev/null 2>&1"), 0) << "mpirun not found (openmpi-bin)";
  Scratch s;
  s.write("exp.yaml", kTinyMockYaml);
  auto argv = mpirun_args(kBinary);
  argv.insert(argv.begin() + 1, {"--mca", "odls_base_sigkill_timeout", "10"});
  const auto r = interrupt_run(s, argv, SIGINT, /*group=*/true);
  ASSERT_NE(r.exit_code, -1) << "mpirun did not end within 120 s of the Ctrl-C";
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(processes_in(s.path("")), 0) << "a rank outlived mpirun";
  std::ifstream in(s.path("run/metrics.jsonl"));
  std::int64_t expected_step = 1;
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << "line " << lines + 1 << " is not whole: " << line;
    if (!j.contains("loss")) continue;  // evaluation lines
    EXPECT_EQ(j["step"].get<std::int64_t>(), expected_step++);
  }
  EXPECT_GE(expected_step - 1, r.seen_before) << "metrics lost a logged step";
  const auto eval = last_line(s.path("run/metrics.jsonl"));
  ASSERT_TRUE(eval.is_object() && eval.contains("eval_loss")) << "no final evaluation";
  EXPECT_EQ(eval["step"].get<std::int64_t>(), expected_step - 1);
  EXPECT_TRUE(std::filesystem::exists(s.path("run/memory_snapshot.json")));
}

}  // namespace
}  // namespace memtrain::cli
