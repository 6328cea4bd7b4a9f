// The data-parallel gradient synchroniser as a user meets it: metrics.jsonl's comm_bytes and
// time_comm_exposed_s under mpirun, and a rank whose communication thread fails
// (Note [Injected gradient-sync failure]) ending the whole job with one message.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::Scratch;

std::string mpirun_with_failure(int failing_rank, const std::string& args) {
  const std::string binary = std::string(MEMTRAIN_BINARY_DIR) + "/memtrain";
  const std::string root = ::geteuid() == 0 ? " --allow-run-as-root" : "";
  return "MEMTRAIN_TEST_FAIL_GRADIENT_SYNC=" + std::to_string(failing_rank) +
         " timeout -k 10 300 mpirun --oversubscribe" + root + " -x MEMTRAIN_TEST_FAIL_GRADIENT_SYNC -np 2 '" + binary +
         "' " + args;
}

TEST(GradientSyncCli, TwoRanksLogTheGradientBytesOfEveryStep) {
  Scratch s;
  s.write("c.yaml", testing::kTinyMockYaml);
  const testing::Run r = s.mpirun(2,
                                  "train --config c.yaml --run-dir run --set training.global_batch_size=4 "
                                  "--set training.log_interval=1 --set parallel.bucket_size_mb=0.01");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(s.path("run/metrics.jsonl"));
  int steps = 0;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (!j.contains("comm_bytes")) continue;
    ++steps;
    EXPECT_GT(j["comm_bytes"].get<double>(), 0.0) << line;
    EXPECT_GE(j["time_comm_exposed_s"].get<double>(), 0.0) << line;
  }
  EXPECT_EQ(steps, 2);
}

// The failure happens on rank 1's communication thread, in the first step; rank 0 waits in its
// all-reduce. The error crosses to rank 1's training thread, which reports it and ends the job:
// mpirun exits non-zero within the timeout (124 would mean a hang) and no rank is left.
TEST(GradientSyncCli, AFailedCommunicationThreadEndsEveryRankWithAMessage) {
  Scratch s;
  s.write("c.yaml", testing::kTinyMockYaml);
  const testing::Run r =
      s.shell(mpirun_with_failure(1, "train --config c.yaml --run-dir run --set training.global_batch_size=4"));
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_NE(r.exit_code, 124) << "the job hung: " << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain[rank 1]: "));
  EXPECT_TRUE(contains(r.err, "data-parallel gradient synchronisation failed: injected failure"));
}

}  // namespace
}  // namespace memtrain::cli
