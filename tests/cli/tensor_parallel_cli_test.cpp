// Tensor-parallel jobs as a user launches them: mpirun (and scripts/launch.sh) on 2 or 3
// ranks. Bad grids end every rank with exit 2 and one message; a good one trains the run that
// one process trains.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli::testing {
namespace {

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// The loss of step `step` in a metrics.jsonl ("" when absent).
std::string loss_at(const std::string& metrics, int step) {
  const std::string key = "{\"step\":" + std::to_string(step) + ",\"loss\":";
  const auto at = metrics.find(key);
  if (at == std::string::npos) return "";
  return metrics.substr(at + key.size(), metrics.find(',', at + key.size()) - at - key.size());
}

TEST(TensorParallelCli, WorldThatTheTensorParallelSizeDoesNotDivideExitsTwoOnce) {
  Scratch s;
  s.write("c.yaml", std::string(kTinyMockYaml) + "parallel:\n  tensor_model_parallel_size: 2\n");
  const testing::Run r = s.mpirun(3, "train --config c.yaml --run-dir run");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(count(r.err,
                  "parallel.tensor_model_parallel_size = 2: does not divide the world of 3 "
                  "ranks"),
            1u)
      << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain: config error: c.yaml:17: "));
  EXPECT_EQ(count(r.err, "memtrain[rank"), 0u) << r.err;
  EXPECT_FALSE(std::filesystem::exists(s.path("run")));
}

TEST(TensorParallelCli, HeadsThatTheTensorParallelSizeDoesNotSplitExitTwoOnce) {
  Scratch s;
  // 4 heads (kTinyMockYaml) do not split over 3 ranks.
  s.write("c.yaml", std::string(kTinyMockYaml) + "parallel:\n  tensor_model_parallel_size: 3\n");
  const testing::Run r = s.mpirun(3, "train --config c.yaml --run-dir run");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(count(r.err,
                  "model.num_attention_heads = 4: not divisible by "
                  "parallel.tensor_model_parallel_size = 3"),
            1u)
      << r.err;
  EXPECT_TRUE(contains(r.err, "c.yaml:"));
}

// plan names the flag (and that it was left at its default) and the key's line; its JSON
// compares a tensor-parallel rank's layer with the tensor-parallel row.
TEST(TensorParallelCli, PlanWithTensorParallelism) {
  Scratch s;
  s.write("c.yaml", std::string(kTinyMockYaml) + "parallel:\n  tensor_model_parallel_size: 2\n");
  const testing::Run bad = s.memtrain("plan --config c.yaml --target 1GiB");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_TRUE(contains(bad.err,
                       "--world-size 1 (the default): c.yaml:17: "
                       "parallel.tensor_model_parallel_size = 2: does not divide the "
                       "world of 1 rank;"));
  const testing::Run r = s.memtrain("plan --config c.yaml --target 1GiB --world-size 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const double measured = j["activation_bytes_per_layer"].get<double>();
  const double row = j["analytic"]["korthikanti_tensor_parallel_bytes_per_layer"].get<double>();
  EXPECT_GT(row, 0.0);
  EXPECT_DOUBLE_EQ(j["analytic"]["activation_per_layer_ratio"].get<double>(), measured / row);
  EXPECT_EQ(j["parameters_on_rank"].get<std::int64_t>() < j["parameters"].get<std::int64_t>(), true);
}

// An error that only rank 1 meets (here: its own config file is missing, an MPMD launch) is
// printed by rank 1 with its rank, and the job ends instead of leaving rank 0 waiting in the
// grid's first collective.
TEST(TensorParallelCli, ErrorOfAnotherRankNamesItAndEndsTheJob) {
  Scratch s;
  s.write("c.yaml", std::string(kTinyMockYaml) + "parallel:\n  tensor_model_parallel_size: 2\n");
  const std::string binary = std::string(MEMTRAIN_BINARY_DIR) + "/memtrain";
  const std::string root = ::geteuid() == 0 ? " --allow-run-as-root" : "";
  const testing::Run r = s.shell("timeout -k 10 300 mpirun --oversubscribe" + root + " -np 1 '" + binary +
                                 "' train --config c.yaml --run-dir run : -np 1 '" + binary +
                                 "' train --config missing.yaml --run-dir run");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain[rank 1]: config error: "));
  EXPECT_TRUE(contains(r.err, "missing.yaml"));
}

// tp = 2 through scripts/launch.sh trains the run of one process: the same losses (to the
// rounding of a different summation order) at every logged step.
TEST(TensorParallelCli, LaunchScriptTrainsTheRunOfOneProcess) {
  Scratch s;
  s.write("c.yaml", std::string(kTinyMockYaml) + "  log_interval: 1\n  warmup_steps: 0\n  num_threads: 1\n");
  const testing::Run one = s.memtrain("train --config c.yaml --run-dir one");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const testing::Run two =
      s.shell("MEMTRAIN_BIN='" + std::string(MEMTRAIN_BINARY_DIR) + "/memtrain' '" + std::string(MEMTRAIN_SOURCE_DIR) +
              "/scripts/launch.sh' -n 2 c.yaml --set "
              "parallel.tensor_model_parallel_size=2 --run-dir two");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_TRUE(contains(two.out, "1 data-parallel x 2 tensor-parallel ranks"));
  const std::string a = slurp(s.path("one/metrics.jsonl")), b = slurp(s.path("two/metrics.jsonl"));
  for (int step : {1, 2}) {
    ASSERT_FALSE(loss_at(a, step).empty()) << a;
    ASSERT_FALSE(loss_at(b, step).empty()) << b;
    const double la = std::stod(loss_at(a, step)), lb = std::stod(loss_at(b, step));
    EXPECT_NEAR(lb, la, 1e-6 * la) << "step " << step;
  }
}

// scripts/launch.sh refuses bad usage with exit 2 and a line saying what was wrong, before
// starting mpirun.
TEST(TensorParallelCli, LaunchScriptRefusesBadUsage) {
  Scratch s;
  s.write("c.yaml", kTinyMockYaml);
  std::string script = "'";
  script += MEMTRAIN_SOURCE_DIR;
  script += "/scripts/launch.sh' ";
  const std::pair<std::string, std::string> cases[] = {
      {"", "missing -n N"},
      {"-n 0 c.yaml", "-n 0: expected a positive integer"},
      {"-n two c.yaml", "-n two: expected a positive integer"},
      {"-n 2", "missing CONFIG"},
      {"-n 2 missing.yaml", "CONFIG missing.yaml: no such file"},
      {"--frob -n 2 c.yaml", "unknown option --frob"},
      {"-n 2 --hostfile nope c.yaml", "--hostfile nope: no such file"},
  };
  for (const auto& [args, message] : cases) {
    const testing::Run r = s.shell(script + args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    std::string expected = "launch.sh: ";
    expected += message;
    EXPECT_TRUE(contains(r.err, expected)) << args;
  }
}

}  // namespace
}  // namespace memtrain::cli::testing
