// Note [One job per run directory]: the lock a training job holds on its run directory.
#include "runtime/train/run_directory_lock.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "runtime/core/errors.hpp"
#include "runtime/train/run_directory.hpp"
#include "tests/train/temp_dir.hpp"

namespace memtrain::train {
namespace {

namespace fs = std::filesystem;

std::string refusal(const std::string& dir, double wait_seconds) {
  try {
    RunDirectoryLock::acquire(dir, wait_seconds);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// flock locks belong to an open file, so a second acquire in this process conflicts just as
// another process's would.
TEST(RunDirectoryLock, ASecondHolderIsRefusedNamingTheFirst) {
  testing::TempDir tmp;
  const auto first = RunDirectoryLock::acquire(tmp.str(), 0);
  const std::string msg = refusal(tmp.str(), 0.2);
  EXPECT_NE(msg.find("run directory " + tmp.str() + " is in use by another job (pid " + std::to_string(::getpid()) +
                     " on host "),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("holds " + tmp.sub(".lock") + "); expected a run directory that no running job writes to"),
            std::string::npos)
      << msg;
}

TEST(RunDirectoryLock, AReleasedLockIsTakenAgain) {
  testing::TempDir tmp;
  { const auto first = RunDirectoryLock::acquire(tmp.str(), 0); }
  EXPECT_NO_THROW(RunDirectoryLock::acquire(tmp.str(), 0));
  EXPECT_TRUE(fs::exists(tmp.sub(".lock")));  // the file stays; only the lock goes
}

// A job whose ranks are still exiting holds the lock a moment longer: the next one waits.
TEST(RunDirectoryLock, WaitsForAHolderThatEnds) {
  testing::TempDir tmp;
  auto first = std::make_unique<RunDirectoryLock>(RunDirectoryLock::acquire(tmp.str(), 0));
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    first.reset();
  });
  EXPECT_NO_THROW(RunDirectoryLock::acquire(tmp.str(), 60));
  release.join();
}

TEST(RunDirectoryLock, AnOpenRunDirectoryHoldsItsLockUntilItIsGone) {
  testing::TempDir tmp;
  const auto path = tmp.sub("run");
  {
    const auto dir = RunDirectory::open(path, "h1", "a: 1\n", "t", "t.yaml", 1);
    EXPECT_FALSE(refusal(path, 0).empty());
  }
  EXPECT_TRUE(refusal(path, 0).empty());
}

TEST(RunDirectoryLock, ALockTakenBeforeOpenIsHandedOver) {
  testing::TempDir tmp;
  const auto path = tmp.sub("run");
  RunDirectory::open(path, "h1", "a: 1\n", "t", "t.yaml", 1);
  ASSERT_TRUE(RunDirectory::is_lockable(path));
  auto lock = RunDirectoryLock::acquire(path, 0);
  const auto dir = RunDirectory::open(path, "h1", "a: 1\n", "t", "t.yaml", 1, std::move(lock));
  EXPECT_TRUE(dir.reused());
  EXPECT_FALSE(refusal(path, 0).empty());
}

// A directory that holds only the lock file (a first start that stopped before run.json) is a
// new run directory; a directory that is not a run gets no lock file put into it.
TEST(RunDirectoryLock, OnlyTheLockFileCountsAsEmptyAndAForeignDirectoryGetsNone) {
  testing::TempDir tmp;
  const auto path = tmp.sub("run");
  fs::create_directories(path);
  std::ofstream(path + "/.lock") << "pid 1 on host gone\n";
  EXPECT_TRUE(RunDirectory::is_lockable(path));
  EXPECT_FALSE(RunDirectory::open(path, "h1", "a: 1\n", "t", "t.yaml", 1).reused());

  const auto foreign = tmp.sub("foreign");
  fs::create_directories(foreign);
  std::ofstream(foreign + "/notes.txt") << "mine\n";
  EXPECT_FALSE(RunDirectory::is_lockable(foreign));
  EXPECT_THROW(RunDirectory::open(foreign, "h1", "a: 1\n", "t", "t.yaml", 1), ConfigError);
  EXPECT_FALSE(fs::exists(foreign + "/.lock"));
}

}  // namespace
}  // namespace memtrain::train
