// Many jobs on one ledger, with real processes (issue 44, sections 3-5): cached memory is
// released across jobs, the ranks of one job share one entry, and `memtrain top` shows the jobs
// as a table, as JSON, live on a terminal (tmux) and as Prometheus text (checked by promtool).
// Every test uses a ledger of its own (its pid in the name).
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::LedgerCleanup;
using testing::Scratch;

using testing::grouped;
std::string binary() { return testing::memtrain_binary(); }
std::string ledger_name(const std::string& what) { return "pooltest-" + what + "-" + std::to_string(::getpid()); }

// A job that trains until stopped: 64-token rows of mock data, micro-batches of 2.
std::string long_job_yaml(const std::string& ledger, const std::string& capacity) {
  return "model:\n  vocab_size: 256\n  hidden_size: 64\n  num_hidden_layers: 2\n  num_attention_heads: 4\n"
         "  intermediate_size: 256\n  max_position_embeddings: 64\n"
         "data:\n  mock: true\n  seq_length: 64\n"
         "training:\n  micro_batch_size: 2\n  global_batch_size: 2\n  max_steps: 10000000\n"
         "  lr_decay_steps: 10000000\n  eval_steps: 1\n  eval_interval: 10000000\n  log_interval: 50\n"
         "  num_threads: 1\n"
         "memory:\n  capacity: " +
         capacity + "\n  ledger: " + ledger + "\n";
}

// Shell lines that start job A in the background ($a), wait for its first logged step, and
// stop it with SIGTERM at the end ("stop_a").
const char* kWaitForA =
    " for i in $(seq 600); do grep -q '\"loss\"' A/metrics.jsonl 2>/dev/null && break; sleep 0.1; done;";

// Note [Cross-job release]: A evaluates at step 0 with 1024-row micro-batches (a peak of 260
// MiB, measured) and keeps it cached while it trains with 2-row ones (a working set of about 4
// MiB); B, whose steps need about 50 MiB, starts on a 300 MiB ledger. With release B finishes;
// with memory.release_timeout 0 it fails with out-of-memory. A trains on in both cases, and
// stops cleanly (SIGTERM, exit 143) once B is done.
void run_a_then_b(const Scratch& s, const std::string& ledger, int release_timeout, int& b_exit, int& a_exit,
                  std::string& b_err) {
  const std::string cfg = s.write("c.yaml", long_job_yaml(ledger, "300MiB"));
  const auto r = s.shell(grouped(
      "'" + binary() +
      "' train --config c.yaml --run-dir A --set training.eval_micro_batch_size=1024"
      " >a.out 2>a.err & a=$!;" +
      kWaitForA + " '" + binary() +
      "' train --config c.yaml --run-dir B --set training.micro_batch_size=64"
      " --set training.global_batch_size=64 --set training.max_steps=5 --set memory.release_timeout=" +
      std::to_string(release_timeout) + " >b.out 2>b.err; echo \"b=$?\"; kill -TERM $a; wait $a; echo \"a=$?\""));
  b_exit = testing::printed_code(r.out, "b");
  a_exit = testing::printed_code(r.out, "a");
  b_err = testing::slurp(s.path("b.err"));
}

TEST(Pool, CachedMemoryOfAnotherJobIsReleasedAndBothFinish) {
  Scratch s;
  int b = 0, a = 0;
  std::string err;
  const LedgerCleanup cleanup{ledger_name("release")};
  run_a_then_b(s, ledger_name("release"), 10, b, a, err);
  EXPECT_EQ(b, 0) << err;
  EXPECT_EQ(a, 143) << testing::slurp(s.path("a.err"));  // the clean stop the test asked for
}

TEST(Pool, WithoutReleaseTheSecondJobRunsOutOfMemory) {
  Scratch s;
  int b = 0, a = 0;
  std::string err;
  const LedgerCleanup cleanup{ledger_name("norelease")};
  run_a_then_b(s, ledger_name("norelease"), 0, b, a, err);
  EXPECT_EQ(b, 1) << err;
  EXPECT_TRUE(contains(err, "out of memory on " + ledger_name("norelease") + ": job 'B'"));
  EXPECT_EQ(a, 143) << testing::slurp(s.path("a.err"));
}

// Note [A job is its run directory]: two ranks of one job are one entry with two pids; top's
// JSON, table and Prometheus text show it; promtool accepts the text.
TEST(Pool, RanksOfOneJobShareAnEntryAndTopShowsIt) {
  Scratch s;
  const std::string ledger = ledger_name("top");
  const LedgerCleanup cleanup{ledger};
  s.write("c.yaml", long_job_yaml(ledger, "1GiB"));
  const std::string root = ::geteuid() == 0 ? " --allow-run-as-root" : "";
  const auto r =
      s.shell(grouped("timeout -k 5 300 mpirun --oversubscribe" + root + " -np 2 '" + binary() +
                      "' train --config c.yaml --run-dir A --set training.global_batch_size=4 >a.out 2>a.err & a=$!;" +
                      kWaitForA + " '" + binary() + "' top --ledger " + ledger +
                      " --json > top.json; echo \"json=$?\";" + " '" + binary() + "' top --ledger " + ledger +
                      " --once > top.txt; echo \"once=$?\";" + " '" + binary() + "' top --ledger " + ledger +
                      " --serve 127.0.0.1:0 > serve.out 2>&1 & t=$!;"
                      " for i in $(seq 100); do grep -q 'http://' serve.out && break; sleep 0.1; done;"
                      " url=$(grep -o 'http://[^ ]*' serve.out); /usr/bin/python3 -c \"import sys,urllib.request;"
                      " sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())\" $url > metrics.txt;"
                      " echo \"scrape=$?\"; kill -TERM $t; wait $t; echo \"serve=$?\";"
                      " promtool check metrics < metrics.txt; echo \"promtool=$?\"; kill -TERM $a; wait $a"));
  EXPECT_TRUE(contains(r.out, "json=0"));
  EXPECT_TRUE(contains(r.out, "once=0"));
  EXPECT_TRUE(contains(r.out, "scrape=0"));
  EXPECT_TRUE(contains(r.out, "serve=0"));
  EXPECT_TRUE(contains(r.out, "promtool=0")) << r.err;
  const auto doc = nlohmann::json::parse(testing::slurp(s.path("top.json")));
  ASSERT_EQ(doc["jobs"].size(), 1u) << doc.dump(2);
  const auto& job = doc["jobs"][0];
  EXPECT_EQ(job["ranks"], 2);
  EXPECT_EQ(job["pids"].size(), 2u);
  EXPECT_EQ(job["run_dir"], s.path("A"));
  EXPECT_EQ(job["name"], "A");
  EXPECT_GT(job["allocated_bytes"].get<std::size_t>(), 0u);
  EXPECT_EQ(job["reserved_bytes"].get<std::size_t>(), job["per_rank"][0]["reserved_bytes"].get<std::size_t>() +
                                                          job["per_rank"][1]["reserved_bytes"].get<std::size_t>());
  EXPECT_TRUE(contains(testing::slurp(s.path("top.txt")), "A "));
  const std::string metrics = testing::slurp(s.path("metrics.txt"));
  EXPECT_TRUE(contains(metrics, "memtrain_job_ranks{ledger=\"" + ledger + "\""));
  EXPECT_TRUE(contains(metrics, "job=\"A\",run_dir=\"" + s.path("A") + "\"} 2"));
}

// The live view under a terminal (tmux): it draws the table, redraws in place, and q quits.
TEST(Pool, TopRefreshesInPlaceOnATerminalAndQQuits) {
  Scratch s;
  const std::string ledger = ledger_name("live");
  const LedgerCleanup cleanup{ledger};
  const std::string session = "memtrain-top-" + std::to_string(::getpid());
  s.write("c.yaml", long_job_yaml(ledger, "1GiB"));
  const auto r = s.shell(
      grouped("'" + binary() + "' train --config c.yaml --run-dir A >a.out 2>a.err & a=$!;" + kWaitForA + " tmux -L " +
              session + " new-session -d -s top -x 160 -y 20 \"'" + binary() + "' top --ledger " + ledger +
              " --interval 0.2; echo exited > top.done; sleep 30\";"
              " sleep 2; tmux -L " +
              session + " capture-pane -p -t top > screen1.txt; sleep 1; tmux -L " + session +
              " capture-pane -p -t top > screen2.txt; tmux -L " + session +
              " send-keys -t top q; for i in $(seq 50); do [ -f top.done ] && break; sleep 0.1; done;"
              " tmux -L " +
              session + " kill-server; kill -TERM $a; wait $a; cat top.done"));
  const std::string screen1 = testing::slurp(s.path("screen1.txt"));
  const std::string screen2 = testing::slurp(s.path("screen2.txt"));
  EXPECT_TRUE(contains(screen1, "ledger " + ledger));
  EXPECT_TRUE(contains(screen1, "training"));
  // In place: the header is drawn once per screen, not appended below the previous one.
  EXPECT_EQ(screen2.find("ledger " + ledger), screen2.rfind("ledger " + ledger)) << screen2;
  EXPECT_TRUE(contains(r.out, "exited")) << r.err;
}

}  // namespace
}  // namespace memtrain::cli
