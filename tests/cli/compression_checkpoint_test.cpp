// Checkpoints of compressed runs as a user meets them: every data-parallel rank writes its own
// error feedback (and PowerSGD's warm-start Qs), 1-bit Adam's frozen variance and momentum go
// with the optimizer, and a SIGKILL then resume under mpirun continues bitwise: the resumed run
// compresses exactly as the uninterrupted one (Note [Compression state in checkpoints]). A
// resume onto another data-parallel size is refused: the errors are per rank.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <ostream>
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

struct Method {
  const char* name;
  const char* yaml;
  const char* training;  // lines added to the training section
  const char* tensor;    // one state tensor the compression file must hold, different on each rank
};

// dp = 2 (global batch 4 of micro-batches 2), dropout on, compressing early (1-bit Adam: frozen
// after one plain step, so the checkpoint at step 2 already holds momentum errors).
std::string config(const Scratch& s, const Method& m, int max_steps) {
  std::string text = slurp(checkpoint_config(s, std::string(m.name) + ".yaml", max_steps, 2, m.yaml));
  text.replace(text.find("  global_batch_size: 2\n"), 23, std::string("  global_batch_size: 4\n") + m.training);
  return s.write(std::string(m.name) + ".yaml", text);
}

void PrintTo(const Method& m, std::ostream* os) { *os << m.name; }

class CompressionCheckpoint : public ::testing::TestWithParam<Method> {};

TEST_P(CompressionCheckpoint, KillAndResumeContinueBitwiseWithEveryRanksState) {
  const Method m = GetParam();
  Scratch s;
  const std::string cfg = config(s, m, 5);
  const auto straight = s.mpirun(2, "train --config " + cfg + " --run-dir straight");
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  const std::string dir = s.path("straight/checkpoints/step-00000004");
  std::vector<std::vector<std::byte>> state;
  for (const char* f : {"compression-tp00-dp00.safetensors", "compression-tp00-dp01.safetensors"}) {
    ASSERT_TRUE(fs::exists(dir + "/" + f)) << f;
    const auto arrays = core::read_safetensors(dir + "/" + f);
    ASSERT_TRUE(arrays.count(m.tensor)) << f << " lacks " << m.tensor;
    state.push_back(arrays.at(m.tensor).data);
  }
  // Each rank compresses its own gradients, so their errors differ: both files are needed.
  EXPECT_NE(state[0], state[1]) << m.tensor;

  ASSERT_NE(s.mpirun(2, "train --config " + cfg + " --run-dir killed", "MEMTRAIN_FAULT=kill_at_step=3").exit_code, 0);
  const auto resumed = s.mpirun(2, "train --config " + cfg + " --run-dir killed --resume required");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(losses(s, "killed"), losses(s, "straight"));
  EXPECT_EQ(losses(s, "straight").size(), 5u);
  for (const auto& e : fs::directory_iterator(s.path("straight/checkpoints/step-00000005"))) {
    const std::string name = e.path().filename().string();
    if (name == "meta.json" || name == "manifest.json") continue;
    // EXPECT_TRUE: a failure names the file instead of printing its bytes.
    EXPECT_TRUE(slurp(s.path("killed/checkpoints/step-00000005/" + name)) == slurp(e.path().string())) << name;
  }
  // checkpoint.async copies the compressors' state into the staging buffer too.
  const auto async = s.mpirun(2, "train --config " + cfg + " --run-dir async --set checkpoint.async=true");
  ASSERT_EQ(async.exit_code, 0) << async.err;
  for (const char* f : {"compression-tp00-dp00.safetensors", "compression-tp00-dp01.safetensors"}) {
    EXPECT_TRUE(slurp(s.path(std::string("async/checkpoints/step-00000005/") + f)) ==
                slurp(s.path(std::string("straight/checkpoints/step-00000005/") + f)))
        << f;
  }

  // One rank cannot take over two ranks' error feedback: refused before the run directory is
  // touched (its metrics keep their lines).
  const std::string metrics = slurp(s.path("straight/metrics.jsonl"));
  const auto one = s.memtrain("train --config " + config(s, m, 6) + " --run-dir straight --resume required");
  EXPECT_EQ(one.exit_code, 2);
  EXPECT_TRUE(contains(one.err, "holds the compression state of 2 data-parallel ranks, this run has 1")) << one.err;
  EXPECT_EQ(slurp(s.path("straight/metrics.jsonl")), metrics);
}

INSTANTIATE_TEST_SUITE_P(Methods, CompressionCheckpoint,
                         ::testing::Values(Method{"powersgd",
                                                  "compression:\n  method: powersgd\n  rank: 2\n  start_iter: 1\n", "",
                                                  "gradient_sync.bucket0.matrix0.error"},
                                           Method{"onebit", "compression:\n  method: onebit\n  start_iter: 1\n", "",
                                                  "gradient_sync.bucket0.worker_error"},
                                           Method{"onebit_adam", "compression:\n  freeze_step: 1\n",
                                                  "  optimizer: onebit_adam\n", "onebit_adam.bucket0.server_error"}),
                         [](const ::testing::TestParamInfo<Method>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace memtrain::cli
