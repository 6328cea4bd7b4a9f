// A checkpoint that verifies must load, and one that cannot load is skipped (issue 48, section 2;
// Note [A checkpoint that verifies must load], runtime/train/checkpoint_loadable.hpp). Each case
// is a checkpoint written by `memtrain train` and edited as a user would, with its manifest
// recomputed so that the checksums pass: `checkpoint verify` must call it not valid and say
// why, and `train` on the run directory must resume from the previous good checkpoint with a
// warning naming the reason, and end with exit 0 on the uninterrupted run's losses.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/checkpoint/manifest.hpp"
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

const std::string kTwo = "run/checkpoints/step-00000002";
const std::string kFour = "run/checkpoints/step-00000004";

// Four steps with checkpoints of steps 2 and 4 in `run`; the config's path.
std::string train_four_steps(const Scratch& s, const std::string& extra = "") {
  const std::string cfg = checkpoint_config(s, "c.yaml", 4, 2, extra);
  const auto r = s.memtrain("train --config " + cfg + " --run-dir run");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return cfg;
}

// The manifest of `dir` computed again over every file in it, as a user who edited a file
// would (checkpoint_cli_test.cpp does the same).
void recompute_manifest(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename() != "manifest.json") files.push_back(e.path().filename().string());
  }
  std::ofstream(dir + "/manifest.json") << checkpoint::manifest_json(checkpoint::compute_manifest(dir, files));
}

void edit_meta(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  auto meta = nlohmann::json::parse(slurp(dir + "/meta.json"));
  edit(meta);
  std::ofstream(dir + "/meta.json") << meta.dump();
  recompute_manifest(dir);
}

// Rewrites model-tp00.safetensors of `dir` with `edit` applied to its tensors (metadata kept).
void edit_model(const std::string& dir, const std::function<void(std::map<std::string, core::HostArray>&)>& edit) {
  const std::string file = dir + "/model-tp00.safetensors";
  std::map<std::string, std::string> metadata;
  auto tensors = core::read_safetensors(file, &metadata);
  edit(tensors);
  core::write_safetensors(file, tensors, metadata);
  recompute_manifest(dir);
}

// `checkpoint verify DIR` says not valid (exit 1) with every line of `reasons`.
void expect_not_valid(const Scratch& s, const std::string& dir, const std::vector<std::string>& reasons) {
  const auto v = s.memtrain("checkpoint verify " + dir);
  EXPECT_EQ(v.exit_code, 1) << v.out << v.err;
  EXPECT_TRUE(contains(v.out, "checkpoint " + dir + ": not valid")) << v.out;
  for (const auto& r : reasons) EXPECT_TRUE(contains(v.out, "  " + dir + "/" + r)) << v.out;
}

// `train` on the run directory resumes from `from` (skipping `skipped` with the first of
// `reasons` in its warning) and ends with exit 0; steps 1-4 are then `want`'s, bit for bit.
void expect_resumes_from(const Scratch& s, const std::string& cfg, const std::string& from, const std::string& skipped,
                         const std::string& reason, const std::map<long, double>& want, const std::string& args = "") {
  const auto r = s.memtrain("train --config " + cfg + " --run-dir run" + args);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain: warning: skipping checkpoint " + skipped + ": " + reason)) << r.err;
  EXPECT_TRUE(contains(r.out, "memtrain: resumed from checkpoint " + from + " ")) << r.out;
  const auto got = losses(s, "run");
  for (const auto& [step, loss] : want) {
    ASSERT_TRUE(got.count(step)) << step;
    EXPECT_EQ(got.at(step), loss) << "step " << step;
  }
}

// "step": 3 inside step-00000004 was resumed as step 3.
TEST(CheckpointLoad, AStepThatIsNotTheDirectorysIsSkipped) {
  Scratch s;
  const std::string cfg = train_four_steps(s);
  const auto want = losses(s, "run");
  edit_meta(s.path(kFour), [](nlohmann::json& m) { m["step"] = 3; });
  const std::string reason = "meta.json: \"step\" is 3, and the directory step-00000004 is the checkpoint of step 4";
  expect_not_valid(s, kFour, {reason});
  expect_resumes_from(s, cfg, kTwo, kFour, reason, want);
}

// A directory renamed step-00000099 was taken as the newest, over the later valid step 4.
TEST(CheckpointLoad, ARenamedDirectoryIsSkippedForTheNewestValidOne) {
  Scratch s;
  const std::string cfg = train_four_steps(s);
  const auto want = losses(s, "run");
  fs::rename(s.path(kTwo), s.path("run/checkpoints/step-00000099"));
  const std::string reason = "meta.json: \"step\" is 2, and the directory step-00000099 is the checkpoint of step 99";
  expect_not_valid(s, "run/checkpoints/step-00000099", {reason});
  expect_resumes_from(s, checkpoint_config(s, "six.yaml", 6, 2), kFour, "run/checkpoints/step-00000099", reason, want);
}

// "step": "thirty" was reported by verify, and then stopped the resume with exit 1.
TEST(CheckpointLoad, AStepOfTheWrongTypeIsSkipped) {
  Scratch s;
  const std::string cfg = train_four_steps(s);
  const auto want = losses(s, "run");
  edit_meta(s.path(kFour), [](nlohmann::json& m) { m["step"] = "thirty"; });
  const std::string reason = "meta.json: field \"step\" = \"thirty\"; expected an integer";
  expect_not_valid(s, kFour, {reason});
  expect_resumes_from(s, cfg, kTwo, kFour, "meta.json: field \"step\"", want);
}

// A tensor_model_parallel_size in meta.json that the shard files do not have: verify said
// valid, the resume exited 1.
TEST(CheckpointLoad, ATensorParallelSizeThatTheShardFilesDoNotHaveIsSkipped) {
  Scratch s;
  const std::string cfg = train_four_steps(s);
  const auto want = losses(s, "run");
  edit_meta(s.path(kFour), [](nlohmann::json& m) { m["tensor_model_parallel_size"] = 2; });
  const std::string layout = "tensor_model_parallel_size 2, data_parallel_size 1, zero_stage 0";
  const std::string reason = "model-tp01.safetensors: missing, and meta.json's layout (" + layout + ") needs it";
  expect_not_valid(s, kFour,
                   {reason, "optimizer-tp01.safetensors: missing",
                    "meta.json: \"tensor_model_parallel_size\" is 2, and config.yaml has "
                    "parallel.tensor_model_parallel_size 1",
                    "model-tp00.safetensors: tensor bert.embeddings.word_embeddings.weight is F32 [64, 32], the "
                    "model of config.yaml (tensor_model_parallel_size 2) has F32 [128, 32]"});
  expect_resumes_from(s, cfg, kTwo, kFour, reason, want);
}

// The other way: the shard files of two tensor-parallel ranks under a meta.json that says one.
// The resume onto one process merges the shards of step 2 (Note [Resharding onto another
// tensor-parallel size]), so only the warning and the exit are checked, not bitwise losses.
TEST(CheckpointLoad, ShardFilesOfMoreRanksThanMetaJsonSaysAreSkipped) {
  Scratch s;
  const std::string cfg = checkpoint_config(s, "tp.yaml", 4, 2, "parallel:\n  tensor_model_parallel_size: 2\n");
  const auto t = s.mpirun(2, "train --config " + cfg + " --run-dir run");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  edit_meta(s.path(kFour), [](nlohmann::json& m) { m["tensor_model_parallel_size"] = 1; });
  const std::string reason =
      "model-tp01.safetensors: not a file of meta.json's layout (tensor_model_parallel_size 1, data_parallel_size 1, "
      "zero_stage 0)";
  expect_not_valid(s, kFour, {reason, "model-tp00.safetensors: tensor "});
  const auto r = s.memtrain("train --config " + cfg + " --set parallel.tensor_model_parallel_size=1 --run-dir run");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain: warning: skipping checkpoint " + kFour + ": " + reason)) << r.err;
  EXPECT_TRUE(contains(r.out, "memtrain: resumed from checkpoint " + kTwo + " ")) << r.out;
}

// A renamed tensor (the checkpoint of another model version, say): verify said valid, the
// resume exited 1 with "no tensor".
TEST(CheckpointLoad, ARenamedTensorIsSkipped) {
  Scratch s;
  const std::string cfg = train_four_steps(s);
  const auto want = losses(s, "run");
  const std::string name = "bert.embeddings.LayerNorm.weight";
  edit_model(s.path(kFour), [&](auto& tensors) {
    tensors["bert.embeddings.layer_norm.weight"] = tensors.at(name);
    tensors.erase(name);
  });
  const std::string model = "the model of config.yaml (tensor_model_parallel_size 1)";
  const std::string reason = "model-tp00.safetensors: no tensor " + name + ", which " + model + " has";
  expect_not_valid(s, kFour,
                   {reason, "model-tp00.safetensors: tensor bert.embeddings.layer_norm.weight is not one of " + model});
  expect_resumes_from(s, cfg, kTwo, kFour, reason, want);
}

// A reshaped tensor (same bytes, another shape): verify said valid, the resume exited 1.
TEST(CheckpointLoad, AReshapedTensorIsSkipped) {
  Scratch s;
  const std::string cfg = train_four_steps(s);
  const auto want = losses(s, "run");
  const std::string name = "bert.embeddings.word_embeddings.weight";
  edit_model(s.path(kFour), [&](auto& tensors) { tensors.at(name).shape = {32, 64}; });
  const std::string reason = "model-tp00.safetensors: tensor " + name +
                             " is F32 [32, 64], the model of config.yaml (tensor_model_parallel_size 1) has F32 "
                             "[64, 32]";
  expect_not_valid(s, kFour, {reason});
  expect_resumes_from(s, cfg, kTwo, kFour, reason, want);
}

// A rollback chooses as a resume does (TrainingRun::choose_rollback_target): a copy of step 2
// named step-00000003 (trusted, and its bytes verify) is skipped by the resume and again by
// the rollback that a NaN streak at steps 3-4 starts, which goes to step 2; the run then ends
// on the unfaulted run's losses, bit for bit.
TEST(CheckpointLoad, ARollbackSkipsACheckpointThatCannotLoad) {
  Scratch s;
  std::string text = slurp(checkpoint_config(s, "c.yaml", 8, 2, "health:\n  max_consecutive_skips: 2\n"));
  text.replace(text.find("  lr_decay_steps: 5\n"), 20, "  lr_decay_steps: 8\n");
  const std::string cfg = s.write("c.yaml", text);
  ASSERT_EQ(s.memtrain("train --config " + cfg + " --run-dir clean").exit_code, 0);
  ASSERT_EQ(s.memtrain("train --config " + cfg + " --set training.max_steps=2 --run-dir run").exit_code, 0);
  fs::copy(s.path(kTwo), s.path("run/checkpoints/step-00000003"));
  const auto r = s.memtrain("train --config " + cfg + " --run-dir run", "MEMTRAIN_FAULT=nan_grad=3:0:2");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string warning =
      "memtrain: warning: skipping checkpoint run/checkpoints/step-00000003: meta.json: \"step\" is 2, and the "
      "directory step-00000003 is the checkpoint of step 3";
  const auto first = r.err.find(warning);
  ASSERT_NE(first, std::string::npos) << r.err;
  EXPECT_NE(r.err.find(warning, first + warning.size()), std::string::npos) << "no second warning:\n" << r.err;
  EXPECT_TRUE(contains(r.out, "memtrain: resumed from checkpoint " + kTwo + " ")) << r.out;
  EXPECT_TRUE(contains(r.out, "rolled back to checkpoint " + kTwo + " (step 2")) << r.out;
  EXPECT_EQ(losses(s, "run"), losses(s, "clean"));
}

// A file that is not in the manifest is not part of the checkpoint: a note, the checkpoint
// stays valid and is resumed (it made the checkpoint "corrupt" and the resume skipped it).
TEST(CheckpointLoad, AnExtraFileIsANoteAndTheCheckpointIsResumed) {
  Scratch s;
  train_four_steps(s);
  std::ofstream(s.path(kFour + "/meta.json.orig")) << "{}";
  const auto v = s.memtrain("checkpoint verify " + kFour);
  EXPECT_EQ(v.exit_code, 0) << v.out;
  EXPECT_EQ(v.out, "checkpoint " + kFour + ": valid\n  note: " + kFour +
                       "/meta.json.orig: not in the manifest, so not part of the checkpoint (a load never reads it)\n");
  const auto r = s.memtrain("train --config " + checkpoint_config(s, "six.yaml", 6, 2) + " --run-dir run");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(contains(r.err, "skipping checkpoint")) << r.err;
  EXPECT_TRUE(contains(r.out, "memtrain: resumed from checkpoint " + kFour + " (step 4)")) << r.out;
}

}  // namespace
}  // namespace memtrain::cli
