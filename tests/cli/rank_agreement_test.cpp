// Note [Ranks agree before they start]: ranks launched with other settings (an MPMD mpirun, as a
// config file that differs between nodes would do) stop at start-up with one config error that
// names the setting, exit 2, and leave no run directory; ranks that agree train as before.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli::testing {
namespace {

// `mpirun -np 1 memtrain <a> : -np 1 memtrain <b>` in the scratch directory.
Run mpmd(const Scratch& s, const std::string& a, const std::string& b) {
  const std::string binary = std::string(MEMTRAIN_BINARY_DIR) + "/memtrain";
  const std::string root = ::geteuid() == 0 ? " --allow-run-as-root" : "";
  return s.shell("timeout -k 10 300 mpirun --oversubscribe" + root + " -np 1 '" + binary + "' " + a + " : -np 1 '" +
                 binary + "' " + b);
}

int occurrences(const std::string& text, const std::string& part) {
  int n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(RankAgreement, AnotherModelSizeOnRankOneIsOneConfigError) {
  Scratch s;
  const std::string cfg = s.write("c.yaml", kTinyMockYaml);
  const auto r = mpmd(s, "train --config " + cfg + " --run-dir run",
                      "train --config " + cfg + " --run-dir run --set model.hidden_size=64");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(occurrences(r.err, "rank 1 has model.hidden_size: 64 where rank 0 has model.hidden_size: 32"), 1) << r.err;
  EXPECT_FALSE(std::filesystem::exists(s.path("run"))) << "a run directory was left behind";
}

TEST(RankAgreement, ACommandLineOptionThatDiffersIsNamed) {
  Scratch s;
  const std::string cfg = s.write("c.yaml", kTinyMockYaml);
  const auto r =
      mpmd(s, "train --config " + cfg + " --run-dir a", "train --config " + cfg + " --run-dir a --profile-ops");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "rank 1 has --profile-ops: yes where rank 0 has --profile-ops: no")) << r.err;
}

// The same settings through an MPMD launch train: the check compares settings, not how the
// ranks were started. data.cache_dir and training.num_threads are each process's own, and
// --run-dir is rank 0's alone.
TEST(RankAgreement, TheSameSettingsTrainEvenWithAnotherCacheDirectory) {
  Scratch s;
  const std::string cfg = s.write("c.yaml", kTinyMockYaml);
  const std::string two_ranks = " --set training.global_batch_size=4";
  const auto r = mpmd(s, "train --config " + cfg + " --run-dir run" + two_ranks,
                      "train --config " + cfg + " --run-dir other --set data.cache_dir=elsewhere" + two_ranks);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(s.path("run/metrics.jsonl")));
}

}  // namespace
}  // namespace memtrain::cli::testing
