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

// A .lock planted as a symbolic link is never followed (the lock file is emptied and written:
// through a link that would truncate whatever it names); one that is a directory is refused too.
TEST(RunDirectoryLock, ALockFileThatIsALinkOrADirectoryIsRefusedAndItsTargetUntouched) {
  testing::TempDir tmp;
  std::ofstream(tmp.sub("victim")) << "precious\n";
  fs::create_directories(tmp.sub("linked"));
  fs::create_symlink(tmp.sub("victim"), tmp.sub("linked/.lock"));
  try {
    RunDirectoryLock::acquire(tmp.sub("linked"), 0);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(tmp.sub("linked/.lock") + " is not a regular file"), std::string::npos)
        << e.what();
  }
  std::ifstream in(tmp.sub("victim"));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "precious");
  fs::create_directories(tmp.sub("dir/.lock"));
  EXPECT_THROW(RunDirectoryLock::acquire(tmp.sub("dir"), 0), ConfigError);
}

// Two jobs started together on a new directory: the one that looked for checkpoints before the
// other created the directory must not reuse it (it would log every step a second time).
TEST(RunDirectoryLock, ADirectoryAnotherJobCreatedMeanwhileIsRefused) {
  testing::TempDir tmp;
  const auto path = tmp.sub("run");
  RunDirectory::open(path, "h1", "a: 1\n", "t", "t.yaml", 1);  // the other job, done before this one opens
  try {
    RunDirectory::open(path, "h1", "a: 1\n", "t", "t.yaml", 1, std::nullopt, /*seen_new=*/true);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("was created by another job while this one was starting"), std::string::npos)
        << e.what();
  }
  // Seen new and still new (or holding only a lock file): an ordinary first start.
  EXPECT_FALSE(RunDirectory::open(tmp.sub("fresh"), "h1", "a: 1\n", "t", "t.yaml", 1, std::nullopt, true).reused());
}

}  // namespace
}  // namespace memtrain::train
