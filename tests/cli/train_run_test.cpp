// A correct config trains through the binary (exit 0, run directory with its outputs), and a
// second run into the same directory with a different config is refused without touching it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::kTinyMockYaml;
using testing::Scratch;

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(TrainRun, MockRunExitsZeroAndWritesItsRunDirectory) {
  Scratch s;
  s.write("exp.yaml", kTinyMockYaml);
  const auto r = s.memtrain("train --config exp.yaml --run-dir run --set training.log_interval=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(s.path("run/metrics.jsonl")));
  EXPECT_TRUE(std::filesystem::exists(s.path("run/config.yaml")));
}

TEST(TrainRun, RunDirectoryOfAnotherConfigIsNeverOverwritten) {
  Scratch s;
  s.write("exp.yaml", kTinyMockYaml);
  ASSERT_EQ(s.memtrain("train --config exp.yaml --run-dir run").exit_code, 0);
  const std::string metrics = read(s.path("run/metrics.jsonl"));
  const auto r = s.memtrain("train --config exp.yaml --run-dir run --set training.lr=0.5");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain: config error: "));
  EXPECT_EQ(read(s.path("run/metrics.jsonl")), metrics);
}

// A run whose run.json was damaged is still a run: the message says so, instead of calling
// it a directory without run.json, and nothing in it is touched.
TEST(TrainRun, RunDirectoryWithAnInvalidRunJsonIsNamedAsSuch) {
  Scratch s;
  s.write("exp.yaml", kTinyMockYaml);
  ASSERT_EQ(s.memtrain("train --config exp.yaml --run-dir run").exit_code, 0);
  const std::string metrics = read(s.path("run/metrics.jsonl"));
  s.write("run/run.json", "{\"trajectory_hash\": ");
  const auto r = s.memtrain("train --config exp.yaml --run-dir run");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err,
            "memtrain: config error: run directory run: run.json is unreadable or not a JSON object with a "
            "trajectory_hash string; refusing to write into it: expected the run.json memtrain wrote, or "
            "another --run-dir\n");
  EXPECT_EQ(read(s.path("run/metrics.jsonl")), metrics);
}

// An empty --run-dir (an unset shell variable) is a usage error, not the default directory.
// Note [One job per run directory]: while another process holds run/.lock (here util-linux's
// flock, as a job's rank 0 would), a second job waits, then stops with exit 2 naming the lock,
// having read nothing and written nothing into the directory.
TEST(TrainRun, ARunDirectoryInUseByAnotherJobIsRefused) {
  Scratch s;
  s.write("exp.yaml", kTinyMockYaml);
  ASSERT_EQ(s.memtrain("train --config exp.yaml --run-dir run").exit_code, 0);
  const std::string metrics = read(s.path("run/metrics.jsonl"));
  const std::string binary = std::string(MEMTRAIN_BINARY_DIR) + "/memtrain";
  // flock -o: flock itself holds the lock (not the sleep), so killing it releases the lock.
  const auto r = s.shell("true; { flock -o run/.lock sleep 60 & holder=$!; sleep 0.5; '" + binary +
                         "' train --config exp.yaml --run-dir run; rc=$?; kill $holder; wait $holder; exit $rc; }");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(contains(r.err,
                       "memtrain: config error: run directory run is in use by another job (a process holds "
                       "run/.lock); expected a run directory that no running job writes to"))
      << r.err;
  EXPECT_TRUE(contains(r.err, "is locked by another process; waiting up to 10 s")) << r.err;
  EXPECT_EQ(read(s.path("run/metrics.jsonl")), metrics);
  // The lock ends with its holder: the same command then resumes the directory.
  EXPECT_EQ(s.memtrain("train --config exp.yaml --run-dir run").exit_code, 0);
}

// Two jobs started at the same instant on a new run directory (issue 48, section 6): the loser
// finds the winner's lock and its first files but no run.json yet (written last). It used to
// say the directory "is not empty and has no run.json"; it now waits for the lock and names the
// job that holds it. The winner's start is frozen here by holding its lock with flock.
TEST(TrainRun, AJobStartingBesideAnotherOnANewRunDirectoryNamesTheHolder) {
  Scratch s;
  s.write("exp.yaml", kTinyMockYaml);
  std::filesystem::create_directories(s.path("run"));
  s.write("run/config.yaml", "# the winner's first file\n");
  const std::string binary = std::string(MEMTRAIN_BINARY_DIR) + "/memtrain";
  const auto r = s.shell("true; { flock -o run/.lock sleep 60 & holder=$!; sleep 0.5; '" + binary +
                         "' train --config exp.yaml --run-dir run; rc=$?; kill $holder; wait $holder; exit $rc; }");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "run directory run is in use by another job")) << r.err;
  EXPECT_EQ(r.err.find("has no run.json"), std::string::npos) << r.err;
}

TEST(TrainRun, AnEmptyRunDirIsAUsageError) {
  Scratch s;
  s.write("exp.yaml", kTinyMockYaml);
  const auto r = s.memtrain("train --config exp.yaml --run-dir ''");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(
      r.err,
      "memtrain: usage error: --run-dir: empty; expected a value, as `memtrain train --help` says: Run directory"))
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(s.path("runs")));
}

}  // namespace
}  // namespace memtrain::cli
