// Checkpoints of ZeRO-1 runs as a user meets them: every data-parallel rank writes its shard of
// the moments and fp32 masters (optimizer-tp00-dpNN.safetensors); the shards put together are
// the replicated AdamW's state of the same run to rounding (Note [ZeRO-1 shards the buckets]);
// a SIGKILL and resume under mpirun continue bitwise, asynchronous checkpoints write the same
// shards, and one rank resumes a two-rank run by resharding (Note [ZeRO-1 checkpoints reshard
// by element ranges]) within float rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/core/safetensors.hpp"
#include "tests/cli/checkpoint_config.hpp"
#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

namespace fs = std::filesystem;
using testing::checkpoint_config;
using testing::contains;
using testing::losses;
using testing::Scratch;
using testing::slurp;

// dp = 2 (global batch 4 of micro-batches 2), fp16 with masters in the shards, dropout on.
std::string zero_config(const Scratch& s, const std::string& name, int max_steps, int zero_stage) {
  std::string text = slurp(
      checkpoint_config(s, name, max_steps, 2,
                        "precision:\n  dtype: fp16\nparallel:\n  zero_stage: " + std::to_string(zero_stage) + "\n"));
  text.replace(text.find("  global_batch_size: 2\n"), 23, "  global_batch_size: 4\n");
  return s.write(name, text);
}

std::vector<float> floats(const core::HostArray& a) {
  std::vector<float> v(static_cast<std::size_t>(a.numel()));
  std::memcpy(v.data(), a.data.data(), v.size() * 4);
  return v;
}

// name.<kind> of every parameter, put together from the shard files' pieces.
std::map<std::string, std::vector<float>> gathered(const std::string& dir, const char* kind, int shards) {
  std::map<std::string, std::vector<float>> out;
  const auto model = core::read_safetensors(dir + "/model-tp00.safetensors");
  std::map<std::string, std::int64_t> covered;
  for (int r = 0; r < shards; ++r) {
    std::map<std::string, std::string> meta;
    const auto arrays = core::read_safetensors(dir + "/optimizer-tp00-dp0" + std::to_string(r) + ".safetensors", &meta);
    const auto pieces = nlohmann::json::parse(meta.at("memtrain_zero_pieces"));
    for (auto it = pieces.begin(); it != pieces.end(); ++it) {
      auto& full = out[it.key()];
      full.resize(static_cast<std::size_t>(model.at(it.key()).numel()));
      const auto piece = floats(arrays.at(it.key() + "." + kind));
      const auto offset = it.value()[0].get<std::int64_t>();
      std::copy(piece.begin(), piece.end(), full.begin() + offset);
      covered[it.key()] += static_cast<std::int64_t>(piece.size());
    }
  }
  for (const auto& [name, a] : model) EXPECT_EQ(covered[name], a.numel()) << name << " covered by the shards";
  return out;
}

TEST(ZeroCheckpoint, ShardsHoldTheReplicatedStateAndResumeBitwise) {
  Scratch s;
  const std::string zero = zero_config(s, "zero.yaml", 4, 1);
  const std::string replicated = zero_config(s, "adamw.yaml", 4, 0);
  ASSERT_EQ(s.mpirun(2, "train --config " + replicated + " --run-dir adamw").exit_code, 0);
  const auto straight = s.mpirun(2, "train --config " + zero + " --run-dir straight");
  ASSERT_EQ(straight.exit_code, 0) << straight.err;

  // The shards, put together, are stage 0's moments and masters to rounding (the gradients
  // come from a reduce-scatter instead of an all-reduce: the same sums in another order).
  const std::string dir = s.path("straight/checkpoints/step-00000004");
  const auto adamw = core::read_safetensors(s.path("adamw/checkpoints/step-00000004/optimizer-tp00.safetensors"));
  for (const char* kind : {"exp_avg", "exp_avg_sq", "master"}) {
    for (const auto& [name, got] : gathered(dir, kind, 2)) {
      const auto want = floats(adamw.at(name + "." + kind));
      ASSERT_EQ(got.size(), want.size()) << name;
      float scale = 0;
      for (float x : want) scale = std::max(scale, std::fabs(x));
      for (std::size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], 1e-4f * scale + 1e-12f) << name << "." << kind << "[" << i << "]";
      }
    }
  }

  // SIGKILL after step 3 on both ranks, resume on both: bitwise, every shard file included.
  ASSERT_NE(s.mpirun(2, "train --config " + zero + " --run-dir killed", "MEMTRAIN_FAULT=kill_at_step=3").exit_code, 0);
  const auto resumed = s.mpirun(2, "train --config " + zero + " --run-dir killed --resume required");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(losses(s, "killed"), losses(s, "straight"));
  // checkpoint.async: both ranks write their shards on their own threads; the same bytes.
  const auto async = s.mpirun(2, "train --config " + zero + " --run-dir async --set checkpoint.async=true");
  ASSERT_EQ(async.exit_code, 0) << async.err;
  EXPECT_EQ(losses(s, "async"), losses(s, "straight"));
  for (const char* f : {"model-tp00.safetensors", "optimizer-tp00-dp00.safetensors", "optimizer-tp00-dp01.safetensors",
                        "trainer_state.json"}) {
    const std::string want = slurp(dir + "/" + f);
    EXPECT_FALSE(want.empty()) << f;
    // EXPECT_TRUE: a failure names the file instead of printing its bytes.
    EXPECT_TRUE(slurp(s.path(std::string("killed/checkpoints/step-00000004/") + f)) == want) << "killed " << f;
    EXPECT_TRUE(slurp(s.path(std::string("async/checkpoints/step-00000004/") + f)) == want) << "async " << f;
  }
  EXPECT_FALSE(fs::exists(dir + "/optimizer-tp00.safetensors"));
  EXPECT_EQ(s.memtrain("checkpoint verify straight/checkpoints/step-00000004").exit_code, 0);
  const auto inspect = s.memtrain("checkpoint inspect straight/checkpoints/step-00000004");
  EXPECT_TRUE(contains(inspect.out, "  zero_stage: 1\n")) << inspect.out;
  EXPECT_TRUE(contains(inspect.out, "file optimizer-tp00-dp01.safetensors: ")) << inspect.out;
}

// A two-rank ZeRO-1 run's checkpoint of step 2 resumed by one rank: its one shard is put
// together from both old shards, and the losses continue the two-rank trajectory.
TEST(ZeroCheckpoint, OneRankReshardsATwoRankCheckpoint) {
  Scratch s;
  const std::string cfg = zero_config(s, "zero.yaml", 4, 1);
  ASSERT_EQ(s.mpirun(2, "train --config " + cfg + " --run-dir straight").exit_code, 0);
  ASSERT_EQ(s.mpirun(2, "train --config " + zero_config(s, "short.yaml", 2, 1) + " --run-dir one").exit_code, 0);
  const auto r = s.memtrain("train --config " + cfg + " --run-dir one --resume required");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "resumed from checkpoint one/checkpoints/step-00000002 (step 2)")) << r.out;
  const auto expected = losses(s, "straight");
  const auto got = losses(s, "one");
  ASSERT_EQ(got.size(), 4u);
  for (long step = 3; step <= 4; ++step) {
    EXPECT_NEAR(got.at(step), expected.at(step), 1e-5 * std::fabs(expected.at(step))) << step;
  }
  // Its checkpoint has one shard, covering every element.
  const std::string dir = s.path("one/checkpoints/step-00000004");
  EXPECT_TRUE(fs::exists(dir + "/optimizer-tp00-dp00.safetensors"));
  EXPECT_FALSE(fs::exists(dir + "/optimizer-tp00-dp01.safetensors"));
  gathered(dir, "exp_avg", 1);
}

}  // namespace
}  // namespace memtrain::cli
