#include "runtime/train/run_directory.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/core/errors.hpp"
#include "tests/train/temp_dir.hpp"

namespace memtrain::train {
namespace {

namespace fs = std::filesystem;

using testing::slurp;

TEST(RunDirectory, NewDirectoryGetsConfigAndRunJsonWithTheHash) {
  testing::TempDir tmp;
  const auto path = tmp.sub("runs/tiny-1");
  const auto dir = RunDirectory::open(path, "abc123", "model:\n  hidden_size: 64\n", "tiny", "configs/tiny.yaml", 1);
  EXPECT_FALSE(dir.reused());
  EXPECT_EQ(slurp(dir.file("config.yaml")), "model:\n  hidden_size: 64\n");
  const auto run = nlohmann::json::parse(slurp(dir.file("run.json")));
  EXPECT_EQ(run["trajectory_hash"], "abc123");
  EXPECT_EQ(run["config_name"], "tiny");
}

TEST(RunDirectory, SameConfigReusesTheDirectoryAndKeepsItsFiles) {
  testing::TempDir tmp;
  const auto path = tmp.sub("run");
  RunDirectory::open(path, "h1", "a: 1\n", "t", "t.yaml", 1);
  std::ofstream(path + "/metrics.jsonl") << "{\"step\":1}\n";
  const auto again = RunDirectory::open(path, "h1", "a: 1\n", "t", "t.yaml", 1);
  EXPECT_TRUE(again.reused());
  EXPECT_EQ(slurp(path + "/metrics.jsonl"), "{\"step\":1}\n");
}

// A resume may change max_steps or the rank count (same trajectory_hash): config.yaml and run.json
// describe the latest start, a hand edit is replaced, and created_at stays the first start's.
TEST(RunDirectory, AReuseRewritesConfigAndRunJsonKeepingTheCreationTime) {
  testing::TempDir tmp;
  const auto path = tmp.sub("run");
  RunDirectory::open(path, "h1", "max_steps: 2\n", "t", "t.yaml", 1);
  const auto first = nlohmann::json::parse(slurp(path + "/run.json"));
  std::ofstream(path + "/config.yaml") << "hidden_size: 64 # edited by hand\n";
  RunDirectory::open(path, "h1", "max_steps: 4\n", "t", "t.yaml", 2);
  EXPECT_EQ(slurp(path + "/config.yaml"), "max_steps: 4\n");
  const auto run = nlohmann::json::parse(slurp(path + "/run.json"));
  EXPECT_EQ(run["world_size"], 2);
  EXPECT_EQ(run["created_at"], first["created_at"]);
  EXPECT_TRUE(run.contains("last_started_at"));
  EXPECT_EQ(run["trajectory_hash"], "h1");
}

TEST(RunDirectory, DifferentConfigIsRefusedAndNothingIsOverwritten) {
  testing::TempDir tmp;
  const auto path = tmp.sub("run");
  RunDirectory::open(path, "h1", "a: 1\n", "t", "t.yaml", 1);
  std::ofstream(path + "/metrics.jsonl") << "{\"step\":1}\n";
  try {
    RunDirectory::open(path, "h2", "a: 2\n", "t", "t.yaml", 1);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("different config"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("h1"), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(path + "/config.yaml"), "a: 1\n");
  EXPECT_EQ(nlohmann::json::parse(slurp(path + "/run.json"))["trajectory_hash"], "h1");
  EXPECT_EQ(slurp(path + "/metrics.jsonl"), "{\"step\":1}\n");
}

TEST(RunDirectory, NonEmptyDirectoryThatIsNotARunIsRefused) {
  testing::TempDir tmp;
  std::ofstream(tmp.sub("notes.txt")) << "mine";
  EXPECT_THROW(RunDirectory::open(tmp.str(), "h", "", "t", "t.yaml", 1), ConfigError);
  EXPECT_FALSE(fs::exists(tmp.sub("run.json")));
}

TEST(RunDirectory, ExistingEmptyDirectoryIsUsed) {
  testing::TempDir tmp;
  const auto dir = RunDirectory::open(tmp.str(), "h", "", "t", "t.yaml", 1);
  EXPECT_FALSE(dir.reused());
  EXPECT_TRUE(fs::exists(tmp.sub("run.json")));
}

TEST(RunDirectory, PathThatIsAFileIsRefused) {
  testing::TempDir tmp;
  std::ofstream(tmp.sub("file")) << "x";
  EXPECT_THROW(RunDirectory::open(tmp.sub("file"), "h", "", "t", "t.yaml", 1), ConfigError);
}

// A file where a parent directory belongs is a wrong --run-dir (exit 2), as the path being a
// file itself is.
TEST(RunDirectory, PathBelowAFileIsRefusedAsAConfigError) {
  testing::TempDir tmp;
  std::ofstream(tmp.sub("file")) << "x";
  try {
    RunDirectory::open(tmp.sub("file/run"), "h", "", "t", "t.yaml", 1);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("(a part of the path is a file); expected a directory path (--run-dir)"),
              std::string::npos)
        << e.what();
  }
}

TEST(RunDirectory, DefaultPathIsRunsConfigNameTimestamp) {
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 0;
  tm.tm_mday = 2;
  tm.tm_hour = 3;
  tm.tm_min = 4;
  tm.tm_sec = 5;
  tm.tm_isdst = -1;
  const auto t = std::chrono::system_clock::from_time_t(std::mktime(&tm));
  EXPECT_EQ(RunDirectory::default_path("tiny", t), "runs/tiny-20260102-030405");
}

// A run directory written before run.json's key was renamed holds the trajectory hash as
// config_hash: the same trajectory reuses it (and the rewrite uses the new key), another is
// refused.
TEST(RunDirectory, AnOlderRunJsonWithConfigHashIsStillRead) {
  testing::TempDir tmp;
  const auto path = tmp.sub("run");
  fs::create_directories(path);
  std::ofstream(path + "/run.json") << "{\"config_hash\": \"h1\", \"created_at\": \"then\"}\n";
  try {
    RunDirectory::open(path, "h2", "a: 2\n", "t", "t.yaml", 1);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("trajectory_hash h1"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(RunDirectory::open(path, "h1", "a: 1\n", "t", "t.yaml", 1).reused());
  const auto run = nlohmann::json::parse(slurp(path + "/run.json"));
  EXPECT_EQ(run["trajectory_hash"], "h1");
  EXPECT_EQ(run["created_at"], "then");
}

}  // namespace
}  // namespace memtrain::train
