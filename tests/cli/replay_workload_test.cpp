// `memtrain replay --workload`: several jobs on one simulated device (docs/workloads.md). The
// figures are computed by hand from the traces written here (as in
// tests/memory/multi_job_replay_test.cpp: 60 MiB requests get 60 MiB segments under every
// caching policy); every malformed input exits 2 naming the file and line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::Scratch;

// A caches 60 MiB in step 1 and holds it through step 2; B needs 60 MiB at tick 1 on a 100 MiB
// device with 40 MiB free.
void write_two_jobs(const Scratch& s, const std::string& workload_extra = "") {
  s.write("a.csv",
          "op,id,bytes,stream,tag\nstep,0,,,\nalloc,x,62914560,0,activation\nfree,x,,0,\nstep,1,,,\n"
          "step,2,,,\n");
  s.write("b.csv", "op,id,bytes,stream,tag\nalloc,z,62914560,0,activation\nfree,z,,0,\n");
  s.write("w.yaml", "capacity: 100MiB\n" + workload_extra +
                        "jobs:\n"
                        "  - name: A\n"
                        "    trace: a.csv\n"
                        "  - name: B\n"
                        "    trace: b.csv\n"
                        "    start: 1\n");
}

TEST(ReplayWorkload, ReleaseTakesTheStrandedFailureAway) {
  Scratch s;
  write_two_jobs(s);
  for (const bool release : {true, false}) {
    const auto r = s.memtrain(std::string("replay --workload w.yaml --policy best_fit --policy pytorch --json") +
                              (release ? "" : " --no-release"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("capacity_bytes"), 104857600u);
    EXPECT_EQ(j.at("release"), release);
    ASSERT_EQ(j.at("policies").size(), 2u);
    for (const auto& p : j.at("policies")) {
      EXPECT_EQ(p.at("ticks"), 2);
      EXPECT_EQ(p.at("failures"), release ? 0 : 1) << p.at("policy");
      EXPECT_EQ(p.at("stranded_bytes_at_failures"), release ? 0u : 62914560u);
      EXPECT_EQ(p.at("failures_cached_memory_would_cover"), release ? 0 : 1);
      EXPECT_EQ(p.at("peak_allocated_bytes"), 62914560u);
      EXPECT_DOUBLE_EQ(p.at("device_utilization").get<double>(), 0.6);
      EXPECT_DOUBLE_EQ(p.at("mean_utilization").get<double>(), release ? 1.0 : 0.5);
      EXPECT_EQ(p.at("jobs").at(1).at("name"), "B");
      EXPECT_EQ(p.at("jobs").at(1).at("failed_runs"), release ? 0 : 1);
      EXPECT_EQ(p.at("timeline").at("allocated_bytes").size(), 2u);
      if (!release) {
        EXPECT_EQ(p.at("failure_list").at(0).at("job"), "B");
        EXPECT_EQ(p.at("failure_list").at(0).at("line"), 2);
      }
    }
  }
}

TEST(ReplayWorkload, EveryPolicyByDefaultAndTextWithoutJson) {
  Scratch s;
  write_two_jobs(s);
  auto r = s.memtrain("replay --workload w.yaml --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::vector<std::string> policies;
  for (const auto& p : j.at("policies")) policies.push_back(p.at("policy"));
  EXPECT_EQ(policies, (std::vector<std::string>{"no_cache", "pytorch", "best_fit", "vmm_stitch", "planned"}));
  r = s.memtrain("replay --workload w.yaml --policy best_fit --no-release");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "policy best_fit on a shared simulated device of 100.00 MiB")) << r.out;
  EXPECT_TRUE(contains(r.out, "failed: job B run 0 at tick 1")) << r.out;
  // --capacity overrides the workload's capacity: on 200 MiB nobody fails.
  r = s.memtrain("replay --workload w.yaml --policy best_fit --no-release --capacity 200MiB --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("policies").at(0).at("failures"), 0);
}

// Each malformed workload: exit 2, "memtrain: config error: w.yaml:LINE: ..." (or the trace's
// file and line for a malformed trace).
TEST(ReplayWorkload, MalformedWorkloadsExitTwoWithFileAndLine) {
  Scratch s;
  write_two_jobs(s);
  s.write("bad.csv", "op,id,bytes,stream,tag\nalloc,x,lots,0,\n");
  s.write("keeps.csv", "op,id,bytes,stream,tag\nstep,0,,,\nalloc,k,1024,0,\nstep,1,,,\n");
  struct Case {
    std::string yaml;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"jobs: [a.csv\n", "config error: w.yaml:2: not valid YAML"},
      {"- a.csv\n", "config error: w.yaml:1: expected a YAML mapping with jobs"},
      {"capacity: 1GiB\njob:\n  - trace: a.csv\n",
       "config error: w.yaml:2: job: unknown key; expected jobs or capacity"},
      {"capacity: 1GiB\n", "config error: w.yaml:1: jobs: expected a non-empty list of jobs"},
      {"jobs: []\n", "config error: w.yaml:1: jobs: expected a non-empty list of jobs"},
      {"jobs:\n  - a.csv\n", "config error: w.yaml:2: job 1 is not a mapping"},
      {"jobs:\n  - trace: a.csv\n    begin: 3\n", "config error: w.yaml:3: begin: unknown key of a job"},
      {"jobs:\n  - name: A\n", "config error: w.yaml:2: job 1 has no trace"},
      {"jobs:\n  - trace: none.csv\n", "config error: w.yaml:2: trace "},
      {"jobs:\n  - trace: a.csv\n    start: -1\n",
       "config error: w.yaml:3: start = -1: expected an integer of 0 or more"},
      {"jobs:\n  - trace: a.csv\n    steps: 0\n",
       "config error: w.yaml:3: steps = 0: expected an integer of 1 or more"},
      {"jobs:\n  - trace: a.csv\n    repeat: 0\n", "config error: w.yaml:3: repeat = 0: expected an integer of 1"},
      {"jobs:\n  - trace: a.csv\n    gap: x\n", "config error: w.yaml:3: gap = x: expected an integer of 0 or more"},
      {"jobs:\n  - trace: a.csv\n    trace: b.csv\n", "config error: w.yaml:3: trace: given twice in one job"},
      {"jobs:\n  - trace: a.csv\n  - trace: a.csv\n", "config error: w.yaml:3: a second job named a"},
      {"jobs:\n  - trace: a.csv\njobs:\n  - trace: b.csv\n", "config error: w.yaml:3: jobs: given twice"},
      {"capacity: lots\njobs:\n  - trace: a.csv\n", "config error: w.yaml:1: capacity = lots: expected a device size"},
      {"capacity: 0\njobs:\n  - trace: a.csv\n", "config error: w.yaml:1: capacity is zero"},
      {"capacity: 8EiB\njobs:\n  - trace: a.csv\n", "config error: w.yaml:1: capacity 8EiB is larger than 4 EiB"},
      {"capacity: 2TiB\njobs:\n  - trace: a.csv\n",
       "config error: w.yaml: capacity 2199023255552 bytes with --policy vmm_stitch"},
      {"jobs:\n  - trace: a.csv\n    [1, 2]: 3\n", "config error: w.yaml:3: a key that is not a text"},
      {"jobs:\n  - trace: .\n", "config error: w.yaml:2: trace . is not a regular file"},
      {"jobs:\n  - trace: a.csv\n", "config error: --workload w.yaml: no capacity; expected --capacity SIZE"},
      {"capacity: 1GiB\njobs:\n  - trace: bad.csv\n", "trace error: "},
      {"capacity: 1GiB\njobs:\n  - trace: keeps.csv\n    steps: 2\n",
       "trace error: keeps.csv:3: job 'keeps' runs 2 steps and the trace recorded 1"},
  };
  for (const Case& c : cases) {
    s.write("w.yaml", c.yaml);
    const auto r = s.memtrain(std::string("replay --workload w.yaml --policy ") +
                              (contains(c.error, "vmm_stitch") ? "vmm_stitch" : "best_fit"));
    EXPECT_EQ(r.exit_code, 2) << c.yaml << r.err;
    EXPECT_TRUE(contains(r.err, "memtrain: " + c.error)) << c.yaml << "\n" << r.err;
  }
  // A malformed trace names its own file and line.
  s.write("w.yaml", "capacity: 1GiB\njobs:\n  - trace: bad.csv\n");
  EXPECT_TRUE(contains(s.memtrain("replay --workload w.yaml --policy best_fit").err, "bad.csv:2: bytes 'lots'"));
  std::filesystem::create_directories(s.path("dir.yaml"));
  const auto directory = s.memtrain("replay --workload dir.yaml --policy best_fit");
  EXPECT_EQ(directory.exit_code, 2);
  EXPECT_TRUE(contains(directory.err, "memtrain: config error: dir.yaml: is not a regular file")) << directory.err;
  const auto missing = s.memtrain("replay --workload nowhere.yaml --policy best_fit");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_TRUE(contains(missing.err, "memtrain: config error: nowhere.yaml: workload file not found"));
}

TEST(ReplayWorkload, BadArgumentsExitTwo) {
  Scratch s;
  write_two_jobs(s);
  struct Case {
    std::string args, error;
  };
  const std::vector<Case> cases = {
      {"replay --policy best_fit --capacity 1GiB", "replay: no input; expected --trace FILE or --workload FILE"},
      {"replay --trace b.csv --workload w.yaml", "replay: both --trace and --workload"},
      {"replay --trace b.csv --policy best_fit --capacity 1GiB --no-release", "--no-release: only with --workload"},
      {"replay --trace b.csv --capacity 1GiB", "--policy: missing with --trace"},
      {"replay --trace b.csv --policy best_fit --policy pytorch --capacity 1GiB", "--policy: given more than once"},
      {"replay --trace b.csv --policy best_fit", "--capacity: missing with --trace"},
      {"replay --workload w.yaml --policy first_fit", "--policy first_fit: unknown policy"},
      {"replay --workload w.yaml --capacity 0", "--capacity 0: zero"},
  };
  for (const Case& c : cases) {
    const auto r = s.memtrain(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << r.err;
    EXPECT_TRUE(contains(r.err, c.error)) << c.args << "\n" << r.err;
  }
}

// Traces with step rows still replay alone: the rows label steps and nothing else.
TEST(ReplayWorkload, ATraceWithStepRowsReplaysAlone) {
  Scratch s;
  write_two_jobs(s);
  const auto r = s.memtrain("replay --trace a.csv --policy best_fit --capacity 1GiB --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("events"), 2);
}

// A traced run records its step boundaries (Note [Step boundaries in a trace]): step,0 after
// set-up and the first evaluation, then one row per step; its last step is self-contained past
// the first, so a workload can run it longer than it was recorded.
TEST(ReplayWorkload, ADryRunTraceRecordsItsStepsAndReplaysLonger) {
  Scratch s;
  s.write("exp.yaml",
          "model:\n  vocab_size: 96\n  hidden_size: 32\n  num_hidden_layers: 2\n  num_attention_heads: 4\n"
          "  intermediate_size: 64\n  max_position_embeddings: 32\n"
          "data:\n  mock: true\n  seq_length: 24\n"
          "training:\n  micro_batch_size: 3\n  global_batch_size: 6\n  max_steps: 3\n  eval_steps: 1\n"
          "memory:\n  trace: true\n");
  ASSERT_EQ(s.memtrain("train --config exp.yaml --run-dir dry --dry-run --target 1GiB").exit_code, 0);
  std::vector<std::string> steps;
  std::ifstream in(s.path("dry/memory_trace.csv"));
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("step,")) steps.push_back(line);
  }
  EXPECT_EQ(steps, (std::vector<std::string>{"step,0,,,", "step,1,,,", "step,2,,,", "step,3,,,"}));
  s.write("w.yaml", "capacity: 1GiB\njobs:\n  - trace: dry/memory_trace.csv\n    steps: 10\n");
  const auto r = s.memtrain("replay --workload w.yaml --policy best_fit --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto p = nlohmann::json::parse(r.out).at("policies").at(0);
  EXPECT_EQ(p.at("ticks"), 10);
  EXPECT_EQ(p.at("failures"), 0);
}

}  // namespace
}  // namespace memtrain::cli
