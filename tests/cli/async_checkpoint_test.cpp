// checkpoint.async as a user meets it: the files of a synchronous run byte for byte (config.yaml
// and meta.json but for the async key they record and the creation time), a SIGKILL while a background write is in flight or inside it
// leaves the previous checkpoint, and the resume continues the uninterrupted trajectory; with
// two writers (tensor parallelism under mpirun) the commit waits for both.
#include <gtest/gtest.h>

#include <filesystem>
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

constexpr const char* kAsync = " --set checkpoint.async=true";

std::string step_dir(const std::string& run, int step) {
  char d[32];
  std::snprintf(d, sizeof d, "/checkpoints/step-%08d", step);
  return run + d;
}

// Every file of `run`'s checkpoint (written with checkpoint.async) equals `reference`'s
// (without): config.yaml but for its `async: true`, meta.json but for created_at_unix_s and the
// config's hash and size, manifest.json but for the checksums of those two files.
void expect_same_files(const Scratch& s, const std::string& reference, const std::string& run, int step) {
  const std::string a = s.path(step_dir(reference, step)), b = s.path(step_dir(run, step));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(a)) names.push_back(e.path().filename().string());
  std::vector<std::string> other;
  for (const auto& e : fs::directory_iterator(b)) other.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  std::sort(other.begin(), other.end());
  ASSERT_EQ(other, names) << run;
  for (const auto& n : names) {
    if (n == "meta.json") {
      auto ma = nlohmann::json::parse(slurp(a + "/" + n)), mb = nlohmann::json::parse(slurp(b + "/" + n));
      for (auto* m : {&ma, &mb}) {
        m->erase("created_at_unix_s");
        m->erase("config_hash");
        (*m)["files"].erase("config.yaml");
      }
      EXPECT_EQ(mb, ma) << run << " " << n;
    } else if (n == "manifest.json") {
      auto ma = nlohmann::json::parse(slurp(a + "/" + n)), mb = nlohmann::json::parse(slurp(b + "/" + n));
      EXPECT_EQ(mb["files"].size(), ma["files"].size()) << run << " " << n;
      for (auto it = ma["files"].begin(); it != ma["files"].end(); ++it) {
        if (it.key() != "meta.json" && it.key() != "config.yaml") {
          EXPECT_EQ(mb["files"][it.key()], it.value()) << run << " " << it.key();
        }
      }
    } else if (n == "config.yaml") {
      std::string text = slurp(b + "/" + n);
      const std::string key = "  async: true\n";
      ASSERT_NE(text.find(key), std::string::npos) << run;
      text.replace(text.find(key), key.size(), "  async: false\n");
      EXPECT_EQ(text, slurp(a + "/" + n)) << run;
    } else {
      EXPECT_TRUE(slurp(b + "/" + n) == slurp(a + "/" + n)) << run << " " << n;  // names, not bytes
    }
  }
}

TEST(AsyncCheckpoint, WritesTheSynchronousFilesByteForByte) {
  Scratch s;
  for (const char* dtype : {"fp32", "fp16"}) {
    const std::string cfg =
        checkpoint_config(s, std::string(dtype) + ".yaml", 5, 2, "precision:\n  dtype: " + std::string(dtype) + "\n");
    const std::string sync = std::string("sync-") + dtype, async = std::string("async-") + dtype;
    ASSERT_EQ(s.memtrain("train --config " + cfg + " --run-dir " + sync).exit_code, 0);
    const auto r = s.memtrain("train --config " + cfg + " --run-dir " + async + kAsync);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "memtrain: checkpoint of step 2 saved to " + step_dir(async, 2) + " (")) << r.out;
    EXPECT_TRUE(contains(r.out, "written in the background)")) << r.out;
    EXPECT_EQ(losses(s, async), losses(s, sync)) << dtype;
    for (int step : {4, 5}) expect_same_files(s, sync, async, step);  // keep_last 2
    EXPECT_FALSE(fs::exists(s.path(step_dir(async, 2)))) << dtype;
    EXPECT_EQ(slurp(s.path(async + "/checkpoints/latest")), "step-00000005\n");
    EXPECT_EQ(s.memtrain("checkpoint verify " + step_dir(async, 5)).exit_code, 0);
  }
}

// A SIGKILL right after step 3, while step 2's checkpoint may still be in flight (then it is
// lost and the run starts over, Note [An asynchronous checkpoint is committed by a vote]), and
// one inside the second checkpoint's bytes on the writer thread, when the first is surely whole
// (a checkpoint starts after the previous one is committed): the run resumes and ends on the
// synchronous run's losses and files.
TEST(AsyncCheckpoint, AKillDuringABackgroundWriteResumesFromTheLastWholeCheckpoint) {
  Scratch s;
  const std::string cfg = checkpoint_config(s, "c.yaml", 6, 2);
  ASSERT_EQ(s.memtrain("train --config " + cfg + " --run-dir straight").exit_code, 0);
  ASSERT_EQ(
      s.memtrain("train --config " + cfg + " --run-dir killed" + kAsync, "MEMTRAIN_FAULT=kill_at_step=3").exit_code,
      137);
  const bool committed = fs::exists(s.path("killed/checkpoints/latest"));
  if (committed) {
    EXPECT_EQ(slurp(s.path("killed/checkpoints/latest")), "step-00000002\n");
  }
  auto r = s.memtrain("train --config " + cfg + " --run-dir killed" + kAsync);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(contains(r.out, "memtrain: resumed from checkpoint killed/checkpoints/step-00000002 (step 2)"), committed)
      << r.out;
  EXPECT_EQ(losses(s, "killed"), losses(s, "straight"));
  expect_same_state(s, "straight", "killed", 6);

  std::uintmax_t first = 0;
  for (const auto& e : fs::directory_iterator(s.path(step_dir("straight", 6)))) first += fs::file_size(e.path());
  const auto inside = s.memtrain("train --config " + cfg + " --run-dir inside" + kAsync,
                                 "MEMTRAIN_FAULT=kill_in_checkpoint=" + std::to_string(first + first / 3));
  ASSERT_EQ(inside.exit_code, 137);
  EXPECT_EQ(slurp(s.path("inside/checkpoints/latest")), "step-00000002\n");
  r = s.memtrain("train --config " + cfg + " --run-dir inside --resume required" + kAsync);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "resumed from checkpoint inside/checkpoints/step-00000002 (step 2)")) << r.out;
  EXPECT_EQ(losses(s, "inside"), losses(s, "straight"));
  expect_same_state(s, "straight", "inside", 6);
}

// Two tensor-parallel ranks write a file each on their own threads; rank 0 commits once both
// voted done. The checkpoints are the synchronous run's.
TEST(AsyncCheckpoint, TwoWritersUnderMpirunCommitTheSynchronousFiles) {
  Scratch s;
  const std::string cfg = checkpoint_config(s, "tp.yaml", 4, 2, "parallel:\n  tensor_model_parallel_size: 2\n");
  const auto sync = s.mpirun(2, "train --config " + cfg + " --run-dir sync");
  ASSERT_EQ(sync.exit_code, 0) << sync.err;
  const auto async = s.mpirun(2, std::string("train --config ") + cfg + " --run-dir async" + kAsync);
  ASSERT_EQ(async.exit_code, 0) << async.err;
  EXPECT_EQ(losses(s, "async"), losses(s, "sync"));
  for (int step : {2, 4}) expect_same_files(s, "sync", "async", step);
  EXPECT_TRUE(fs::exists(s.path(step_dir("async", 4) + "/model-tp01.safetensors")));
}

}  // namespace
}  // namespace memtrain::cli
