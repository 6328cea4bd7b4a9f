// Jobs that share a pool and never fail each other (issue 45), with real processes: admission by
// plan (start, wait, refuse), a stop while waiting, an elastic job that shrinks for a job of
// higher priority and grows back, a preempted job, and two ranks that do it together. Results
// are checked against the same job run alone: its checkpoint files bit for bit where only
// recompute or a preemption acted, its parameters within 1e-6 (norm-relative) where the
// micro-batch changed. Every test uses a ledger of its own (its pid in the name).
//
// The job: hidden 128, 2 layers, 64-token rows of mock data, 16 sequences a step. Its planned
// needs (this build, best_fit, with the headroom of Note [Headroom over the plan]): 38 MiB as
// configured, 28 MiB with full recompute, 22 MiB with full recompute at micro-batch 8, 20 MiB at
// micro-batch 4 without recompute; the pools below are sized from them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli/checkpoint_config.hpp"
#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::grouped;
using testing::LedgerCleanup;
using testing::printed_code;
using testing::Scratch;

std::string binary() { return testing::memtrain_binary(); }
std::string ledger_name(const std::string& what) { return "elastic-" + what + "-" + std::to_string(::getpid()); }

// Trains until stopped (or max_steps); the stop's checkpoint is its last state.
std::string job_yaml(const std::string& ledger, int capacity_mib, int max_steps = 1000000) {
  return "model:\n  vocab_size: 1024\n  hidden_size: 128\n  num_hidden_layers: 2\n  num_attention_heads: 4\n"
         "  intermediate_size: 512\n  max_position_embeddings: 64\n"
         "data:\n  mock: true\n  seq_length: 64\n"
         "training:\n  micro_batch_size: 16\n  global_batch_size: 16\n  max_steps: " +
         std::to_string(max_steps) +
         "\n  lr_decay_steps: 1000\n  eval_steps: 1\n  eval_interval: 1000000\n  log_interval: 1\n"
         "  num_threads: 1\n"
         "checkpoint:\n  interval: 1000000\n  keep_last: 2\n"
         "memory:\n  capacity: " +
         std::to_string(capacity_mib) + "MiB\n  admission: wait\n  ledger: " + ledger + "\n";
}

// Shell: wait (at most 60 s) until `file` has a line containing `text`.
std::string wait_for(const std::string& file, const std::string& text) {
  return " for i in $(seq 600); do grep -q '" + text + "' " + file + " 2>/dev/null && break; sleep 0.1; done;";
}

// The pool events of run_dir/metrics.jsonl, in order ("shrink", "grow", ...).
std::vector<std::string> events(const Scratch& s, const std::string& run_dir) {
  std::vector<std::string> out;
  for (const auto& j : testing::metrics_lines(s, run_dir)) {
    if (j.contains("event")) out.push_back(j["event"].get<std::string>());
  }
  return out;
}

// The newest checkpoint's step of run_dir.
int last_checkpoint_step(const Scratch& s, const std::string& run_dir) {
  int step = -1;
  for (const auto& e : std::filesystem::directory_iterator(s.path(run_dir + "/checkpoints"))) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step-", 0) == 0) step = std::max(step, std::stoi(name.substr(5)));
  }
  return step;
}

std::string checkpoint_dir(int step) {
  char dir[32];
  std::snprintf(dir, sizeof dir, "/checkpoints/step-%08d/", step);
  return dir;
}

// The float32 tensors of a safetensors file, concatenated in the file's order (the header, an
// 8-byte length and JSON, skipped): both files come from one model, in one order.
std::vector<float> tensor_data(const std::string& file) {
  const std::string bytes = testing::slurp(file);
  std::uint64_t header = 0;
  EXPECT_GE(bytes.size(), 8u) << file;
  if (bytes.size() < 8) return {};
  std::memcpy(&header, bytes.data(), 8);
  std::vector<float> out((bytes.size() - 8 - header) / sizeof(float));
  std::memcpy(out.data(), bytes.data() + 8 + header, out.size() * sizeof(float));
  return out;
}

// The same job alone, in a pool of its own, trained to `steps`: the reference.
void run_solo(const Scratch& s, const std::string& yaml_name, const std::string& run_dir, int steps,
              const std::string& extra = "") {
  const auto r = s.shell(grouped("'" + binary() + "' train --config " + yaml_name + " --run-dir " + run_dir +
                                 " --set training.max_steps=" + std::to_string(steps) + extra +
                                 " >solo.out 2>solo.err; echo \"solo=$?\""));
  ASSERT_EQ(printed_code(r.out, "solo"), 0) << testing::slurp(s.path("solo.err"));
}

TEST(ElasticPool, AJobThatFitsStartsOneThatDoesNotWaitsAndOneLargerThanThePoolIsRefused) {
  Scratch s;
  const std::string ledger = ledger_name("admit");
  const LedgerCleanup cleanup{ledger};
  s.write("c.yaml", job_yaml(ledger, 40, 200));  // A runs long enough for B to find it running
  const auto r = s.shell(grouped("'" + binary() + "' train --config c.yaml --run-dir A >a.out 2>a.err & a=$!;" +
                                 wait_for("A/metrics.jsonl", "\"loss\"") + " '" + binary() +
                                 "' train --config c.yaml --run-dir B --set training.max_steps=3 >b.out 2>b.err;"
                                 " echo \"b=$?\"; wait $a; echo \"a=$?\"; '" +
                                 binary() +
                                 "' train --config c.yaml --run-dir C --set memory.capacity=20MiB >c.out 2>c.err;"
                                 " echo \"c=$?\""));
  EXPECT_EQ(printed_code(r.out, "a"), 0) << testing::slurp(s.path("a.err"));
  EXPECT_EQ(printed_code(r.out, "b"), 0) << testing::slurp(s.path("b.err"));
  // B waited behind A (38 of 40 MiB taken), then started: its wait is on record.
  const std::string b_out = testing::slurp(s.path("b.out"));
  EXPECT_TRUE(contains(b_out, "memtrain: waiting for 38.00 MiB on ledger " + ledger + ": 0 jobs ahead, 2.00 MiB free"));
  EXPECT_EQ(events(s, "B"), std::vector<std::string>{"wait"});
  // A ran all its steps, untouched by B's wait.
  EXPECT_EQ(testing::losses(s, "A").size(), 200u);
  // C needs 38 MiB and is refused at once with both figures (exit 2), leaving no run directory.
  EXPECT_EQ(printed_code(r.out, "c"), 2);
  const std::string c_err = testing::slurp(s.path("c.err"));
  EXPECT_TRUE(contains(c_err, "this job needs 38.00 MiB"));
  EXPECT_TRUE(contains(c_err, "is 20.00 MiB"));
  EXPECT_FALSE(std::filesystem::exists(s.path("C/run.json")));
}

TEST(ElasticPool, ASignalWhileWaitingEndsTheJobCleanly) {
  Scratch s;
  const std::string ledger = ledger_name("signal");
  const LedgerCleanup cleanup{ledger};
  s.write("c.yaml", job_yaml(ledger, 40));
  const auto r = s.shell(grouped("'" + binary() + "' train --config c.yaml --run-dir A >a.out 2>a.err & a=$!;" +
                                 wait_for("A/metrics.jsonl", "\"loss\"") + " '" + binary() +
                                 "' train --config c.yaml --run-dir B >b.out 2>b.err & b=$!;" +
                                 wait_for("b.out", "waiting for") + " '" + binary() + "' top --ledger " + ledger +
                                 " --json > top.json; kill -TERM $b; wait $b; echo \"b=$?\";"
                                 " kill -INT $a; wait $a; echo \"a=$?\""));
  EXPECT_EQ(printed_code(r.out, "b"), 143) << testing::slurp(s.path("b.err"));
  EXPECT_EQ(printed_code(r.out, "a"), 130) << testing::slurp(s.path("a.err"));
  EXPECT_TRUE(contains(testing::slurp(s.path("b.out")), "stopped while waiting for memory"));
  EXPECT_FALSE(std::filesystem::exists(s.path("B/run.json")));
  // While it waited, `memtrain top` showed it so, holding nothing.
  const auto top = nlohmann::json::parse(testing::slurp(s.path("top.json")));
  bool seen = false;
  for (const auto& job : top["jobs"]) {
    if (job["name"] != "B") continue;
    seen = true;
    EXPECT_EQ(job["state"], "waiting") << top.dump(2);
  }
  EXPECT_TRUE(seen) << top.dump(2);
}

// A (elastic, priority 0) runs; B (priority 1) arrives and does not fit in what is free; A
// shrinks at its next step boundary, B runs and ends, A grows back; then A is stopped and its
// stop's checkpoint is compared with the same job run alone to that step.
struct ShrinkRun {
  int a_exit = -100, b_exit = -100, step = -1;
};

ShrinkRun shrink_and_grow(const Scratch& s, const std::string& ledger, int capacity_mib, int floor) {
  s.write("c.yaml", job_yaml(ledger, capacity_mib));
  const auto r = s.shell(
      grouped("'" + binary() + "' train --config c.yaml --run-dir A --set memory.elastic=true" +
              " --set memory.elastic_min_micro_batch=" + std::to_string(floor) + " >a.out 2>a.err & a=$!;" +
              wait_for("A/metrics.jsonl", "\"loss\"") + " '" + binary() +
              "' train --config c.yaml --run-dir B --set memory.priority=1 --set training.max_steps=5 >b.out 2>b.err;"
              " echo \"b=$?\";" +
              wait_for("A/metrics.jsonl", "\"grow\"") + " kill -TERM $a; wait $a; echo \"a=$?\""));
  ShrinkRun out;
  out.a_exit = printed_code(r.out, "a");
  out.b_exit = printed_code(r.out, "b");
  if (out.a_exit == 143) out.step = last_checkpoint_step(s, "A");
  return out;
}

TEST(ElasticPool, ALowPriorityJobShrinksByRecomputeAndGrowsBackBitForBit) {
  Scratch s;
  const std::string ledger = ledger_name("recompute");
  const LedgerCleanup cleanup{ledger};
  // 70 MiB: A holds 38, B needs 38; A's recompute footprint (28) makes room. Its floor is its
  // micro-batch, so only recompute can act.
  const ShrinkRun run = shrink_and_grow(s, ledger, 70, 16);
  ASSERT_EQ(run.b_exit, 0) << testing::slurp(s.path("b.err"));
  ASSERT_EQ(run.a_exit, 143) << testing::slurp(s.path("a.err"));
  EXPECT_EQ(events(s, "A"), (std::vector<std::string>{"shrink", "grow"}));
  for (const auto& j : testing::metrics_lines(s, "A")) {
    if (!j.contains("event")) continue;
    const auto& small = j["event"] == "shrink" ? j["to"] : j["from"];
    EXPECT_EQ(small["micro_batch_size"], 16) << j.dump();
    EXPECT_EQ(small["recompute"], "full") << j.dump();
  }
  const auto run_json = nlohmann::json::parse(testing::slurp(s.path("A/run.json")));
  EXPECT_EQ(run_json["pool"]["trajectory"], "bitwise") << run_json.dump(2);
  ASSERT_GT(run.step, 0);
  run_solo(s, "c.yaml", "solo", run.step, " --set memory.ledger=" + ledger + "-solo");
  const LedgerCleanup solo_cleanup{ledger + "-solo"};
  testing::expect_same_state(s, "solo", "A", run.step);
}

TEST(ElasticPool, AMicroBatchShrinkStaysWithinRounding) {
  Scratch s;
  const std::string ledger = ledger_name("microbatch");
  const LedgerCleanup cleanup{ledger};
  // 62 MiB: B needs 38 and 24 are free: A must come down to 24 MiB, which only micro-batch 8 with
  // recompute (22) does.
  const ShrinkRun run = shrink_and_grow(s, ledger, 62, 1);
  ASSERT_EQ(run.b_exit, 0) << testing::slurp(s.path("b.err"));
  ASSERT_EQ(run.a_exit, 143) << testing::slurp(s.path("a.err"));
  EXPECT_EQ(events(s, "A"), (std::vector<std::string>{"shrink", "grow"}));
  const auto run_json = nlohmann::json::parse(testing::slurp(s.path("A/run.json")));
  EXPECT_EQ(run_json["pool"]["trajectory"], "within_rounding") << run_json.dump(2);
  ASSERT_GT(run.step, 0);
  run_solo(s, "c.yaml", "solo", run.step, " --set memory.ledger=" + ledger + "-solo");
  const LedgerCleanup solo_cleanup{ledger + "-solo"};
  const std::string file = checkpoint_dir(run.step) + "model-tp00.safetensors";
  const std::vector<float> a = tensor_data(s.path("A" + file)), ref = tensor_data(s.path("solo" + file));
  ASSERT_EQ(a.size(), ref.size());
  ASSERT_FALSE(a.empty());
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (static_cast<double>(a[i]) - ref[i]) * (static_cast<double>(a[i]) - ref[i]);
    norm += static_cast<double>(ref[i]) * ref[i];
  }
  EXPECT_LT(std::sqrt(diff / norm), 1e-6);
  // Resumed by a new process, alone in the pool, the run is still within rounding: its
  // checkpoint carries the pool's record (Note [A pool record travels with the checkpoints]).
  const auto resumed = s.memtrain(
      "train --config c.yaml --run-dir A --set memory.elastic=true --set memory.elastic_min_micro_batch=1"
      " --set training.max_steps=" +
      std::to_string(run.step + 2));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const auto after = nlohmann::json::parse(testing::slurp(s.path("A/run.json")));
  EXPECT_EQ(after["pool"]["trajectory"], "within_rounding") << after.dump(2);
  EXPECT_EQ(after["pool"]["shrinks"], 1) << after.dump(2);
  EXPECT_EQ(after["pool"]["grows"], 1) << after.dump(2);
  EXPECT_TRUE(contains(resumed.out, "within rounding of its solo trajectory")) << resumed.out;
  EXPECT_TRUE(contains(resumed.out, "(with the steps before the resumed checkpoint)")) << resumed.out;
}

TEST(ElasticPool, APreemptedJobResumesBitForBit) {
  Scratch s;
  const std::string ledger = ledger_name("preempt");
  const LedgerCleanup cleanup{ledger};
  // 40 MiB: A (not elastic, checkpoints on) holds 38; B (priority 1) needs 38: A is preempted,
  // waits, and resumes from its checkpoint once B is done.
  s.write("c.yaml", job_yaml(ledger, 40));
  const auto r = s.shell(grouped(
      "'" + binary() + "' train --config c.yaml --run-dir A --set checkpoint.interval=7 >a.out 2>a.err & a=$!;" +
      wait_for("A/metrics.jsonl", "\"loss\"") + " '" + binary() +
      "' train --config c.yaml --run-dir B --set memory.priority=1 --set training.max_steps=5 >b.out 2>b.err;"
      " echo \"b=$?\";" +
      wait_for("A/metrics.jsonl", "\"resume\"") + " sleep 1; kill -TERM $a; wait $a; echo \"a=$?\""));
  ASSERT_EQ(printed_code(r.out, "b"), 0) << testing::slurp(s.path("b.err"));
  ASSERT_EQ(printed_code(r.out, "a"), 143) << testing::slurp(s.path("a.err"));
  EXPECT_EQ(events(s, "A"), (std::vector<std::string>{"preempt", "resume"}));
  const auto run_json = nlohmann::json::parse(testing::slurp(s.path("A/run.json")));
  EXPECT_EQ(run_json["pool"]["trajectory"], "bitwise") << run_json.dump(2);
  EXPECT_EQ(run_json["pool"]["preemptions"], 1) << run_json.dump(2);
  const int step = last_checkpoint_step(s, "A");
  ASSERT_GT(step, 0);
  run_solo(s, "c.yaml", "solo", step, " --set memory.ledger=" + ledger + "-solo");
  const LedgerCleanup solo_cleanup{ledger + "-solo"};
  testing::expect_same_state(s, "solo", "A", step);
}

// A job stopped while it waits after a preemption keeps its record: the relaunch resumes from the
// preemption's checkpoint and counts that preemption (Note [A pool record travels with the
// checkpoints]).
TEST(ElasticPool, AJobStoppedWhilePreemptedIsRelaunchedWithItsRecord) {
  Scratch s;
  const std::string ledger = ledger_name("stopped");
  const LedgerCleanup cleanup{ledger};
  s.write("c.yaml", job_yaml(ledger, 40));
  const auto r = s.shell(grouped(
      "'" + binary() + "' train --config c.yaml --run-dir A >a.out 2>a.err & a=$!;" +
      wait_for("A/metrics.jsonl", "\"loss\"") + " '" + binary() +
      "' train --config c.yaml --run-dir B --set memory.priority=1 --set training.max_steps=2000 >b.out 2>b.err & "
      "b=$!;" +
      wait_for("A/metrics.jsonl", "\"preempt\"") +
      " sleep 0.5; kill -TERM $a; wait $a; echo \"a=$?\";"
      " kill -TERM $b; wait $b; echo \"b=$?\""));
  ASSERT_EQ(printed_code(r.out, "a"), 143) << testing::slurp(s.path("a.err"));
  EXPECT_TRUE(contains(testing::slurp(s.path("a.out")), "stopped while waiting for memory after a preemption"));
  const int step = last_checkpoint_step(s, "A");
  ASSERT_GT(step, 0);
  const auto relaunched =
      s.memtrain("train --config c.yaml --run-dir A --set training.max_steps=" + std::to_string(step + 2));
  ASSERT_EQ(relaunched.exit_code, 0) << relaunched.err;
  const auto run_json = nlohmann::json::parse(testing::slurp(s.path("A/run.json")));
  EXPECT_EQ(run_json["pool"]["preemptions"], 1) << run_json.dump(2);
  EXPECT_EQ(run_json["pool"]["trajectory"], "bitwise") << run_json.dump(2);
}

// Two ranks of one job: they shrink at the same step (one recompute setting for both), are
// preempted together, wait together and resume together; the result is the two-rank job's
// alone, bit for bit. Their stall watchdog (5 s: a loaded machine's steps stay well inside it)
// does not fire while they wait for B2's 200 steps (over 10 s). The job is stopped with SIGUSR1, which mpirun forwards to the ranks
// (exit 138; SIGTERM to mpirun makes it exit 1 whatever the ranks do: interrupt_test.cpp).
TEST(ElasticPool, TwoRanksShrinkWaitAndResumeTogether) {
  Scratch s;
  const std::string ledger = ledger_name("ranks");
  const LedgerCleanup cleanup{ledger};
  // A: 2 ranks x 38 MiB = 76 (recompute: 56). 96 MiB: B1 (38, priority 1) makes A shrink;
  // B2 (priority 2, micro-batch 32: 58 MiB) needs more than A can give by shrinking (20 + 20
  // free): A is preempted.
  s.write("c.yaml", job_yaml(ledger, 96));
  const std::string root = ::geteuid() == 0 ? " --allow-run-as-root" : "";
  const auto r = s.shell(grouped(
      "mpirun --oversubscribe" + root + " -np 2 '" + binary() +
      "' train --config c.yaml --run-dir A --set training.global_batch_size=32 --set memory.elastic=true"
      " --set memory.elastic_min_micro_batch=16 --set checkpoint.interval=7 --set health.stall_timeout=5"
      " >a.out 2>a.err & a=$!;" +
      wait_for("A/metrics.jsonl", "\"loss\"") + " '" + binary() +
      "' train --config c.yaml --run-dir B1 --set memory.priority=1 --set training.max_steps=3 >b1.out 2>b1.err;"
      " echo \"b1=$?\";" +
      wait_for("A/metrics.jsonl", "\"grow\"") + " '" + binary() +
      "' train --config c.yaml --run-dir B2 --set memory.priority=2 --set training.max_steps=200"
      " --set training.micro_batch_size=32 --set training.global_batch_size=32 >b2.out 2>b2.err;"
      " echo \"b2=$?\";" +
      wait_for("A/metrics.jsonl", "\"resume\"") + " sleep 1; kill -USR1 $a; wait $a; echo \"a=$?\""));
  ASSERT_EQ(printed_code(r.out, "b1"), 0) << testing::slurp(s.path("b1.err"));
  ASSERT_EQ(printed_code(r.out, "b2"), 0) << testing::slurp(s.path("b2.err"));
  ASSERT_EQ(printed_code(r.out, "a"), 138) << testing::slurp(s.path("a.err"));
  EXPECT_EQ(events(s, "A"), (std::vector<std::string>{"shrink", "grow", "preempt", "resume"}));
  const int step = last_checkpoint_step(s, "A");
  ASSERT_GT(step, 0);
  const auto solo = s.shell(grouped("timeout -k 5 600 mpirun --oversubscribe" + root + " -np 2 '" + binary() +
                                    "' train --config c.yaml --run-dir solo --set training.global_batch_size=32"
                                    " --set memory.ledger=" +
                                    ledger + "-solo --set training.max_steps=" + std::to_string(step) +
                                    " >solo.out 2>solo.err; echo \"solo=$?\""));
  const LedgerCleanup solo_cleanup{ledger + "-solo"};
  ASSERT_EQ(printed_code(solo.out, "solo"), 0) << testing::slurp(s.path("solo.err"));
  testing::expect_same_state(s, "solo", "A", step);
  const std::string dir = checkpoint_dir(step);
  EXPECT_EQ(testing::slurp(s.path("A" + dir + "model-tp00.safetensors")),
            testing::slurp(s.path("solo" + dir + "model-tp00.safetensors")));
}

// Note [A silent job is passed over]: A (elastic) is stopped with SIGSTOP and cannot shrink; B
// (priority 1) asks it, names it after memory.release_timeout (1 s) and stops asking, so C,
// small enough for what is free, starts and finishes meanwhile. Once A continues it shrinks and
// B starts too.
TEST(ElasticPool, AStoppedJobIsPassedOverAndTheQueueMovesOn) {
  Scratch s;
  const std::string ledger = ledger_name("stopped");
  const LedgerCleanup cleanup{ledger};
  // 70 MiB: A holds 38, B needs 38 (32 free); C (micro-batch 4, 20 MiB) fits beside them.
  s.write("c.yaml", job_yaml(ledger, 70));
  const auto r =
      s.shell(grouped("'" + binary() +
                      "' train --config c.yaml --run-dir A --set memory.elastic=true"
                      " --set memory.elastic_min_micro_batch=16 >a.out 2>a.err & a=$!;" +
                      wait_for("A/metrics.jsonl", "\"loss\"") + " kill -STOP $a; '" + binary() +
                      "' train --config c.yaml --run-dir B --set memory.priority=1 --set memory.release_timeout=1"
                      " --set training.max_steps=3 >b.out 2>b.err & b=$!;" +
                      wait_for("b.out", "passed over") + " '" + binary() +
                      "' train --config c.yaml --run-dir C --set training.micro_batch_size=4 --set training.max_steps=3"
                      " >c.out 2>c.err; echo \"c=$?\"; grep -c admitted b.out > b_admitted_before_cont;"
                      " kill -CONT $a; wait $b; echo \"b=$?\";" +
                      wait_for("A/metrics.jsonl", "\"grow\"") + " kill -TERM $a; wait $a; echo \"a=$?\""));
  EXPECT_EQ(printed_code(r.out, "c"), 0) << testing::slurp(s.path("c.err"));
  EXPECT_EQ(printed_code(r.out, "b"), 0) << testing::slurp(s.path("b.err"));
  EXPECT_EQ(printed_code(r.out, "a"), 143) << testing::slurp(s.path("a.err"));
  const std::string b_out = testing::slurp(s.path("b.out"));
  EXPECT_TRUE(contains(b_out, "memtrain: warning: job 'A' (pid "));
  EXPECT_TRUE(contains(b_out, "has not reached a step boundary within memory.release_timeout (1 s)"));
  // B was still waiting when C had finished, and started after A continued and shrank.
  EXPECT_EQ(testing::slurp(s.path("b_admitted_before_cont")), "0\n");
  EXPECT_TRUE(contains(b_out, "memtrain: admitted after"));
  EXPECT_EQ(events(s, "A"), (std::vector<std::string>{"shrink", "grow"}));
}

}  // namespace
}  // namespace memtrain::cli
