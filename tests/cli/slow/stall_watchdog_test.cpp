// health.stall_timeout (Note [A hung rank ends the job]; issue 48, section 3): one rank of a
// two-rank job is stopped with SIGSTOP, as a hung process would be. Before the watchdog the
// other rank waited in its collective forever. Now the job ends within the timeout (plus the
// heartbeat's few seconds), naming the stopped rank by its world rank and pid, and `memtrain
// supervise` restarts it. The reference is the pid the stopped rank wrote in its heartbeat.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::Scratch;

std::string binary() { return std::string(MEMTRAIN_BINARY_DIR) + "/memtrain"; }

TEST(StallWatchdog, AStoppedRankEndsTheJobNamedAndSuperviseRestartsIt) {
  Scratch s;
  const std::string cfg = s.write(
      "c.yaml", std::string(testing::kTinyMockYaml) + "checkpoint:\n  interval: 20\nhealth:\n  stall_timeout: 8\n");
  const std::string mpirun = std::string("mpirun --oversubscribe") + (::geteuid() == 0 ? " --allow-run-as-root" : "") +
                             " -np 2 '" + binary() + "'";
  // The supervisor's stderr goes to .err; rank 1's heartbeat names its pid; it is stopped once
  // the job has logged a step; the test waits for the restart and for the relaunch to train,
  // then stops the supervisor (every wait is bounded: a watchdog that never fires fails the
  // test after 300 s instead of hanging it).
  const auto r = s.shell(
      "true; { { '" + binary() + "' supervise --max-restarts 1 --backoff 0 -- " + mpirun + " train --config " + cfg +
      " --set training.max_steps=1000000 --set training.lr_decay_steps=1000000 --set training.global_batch_size=4"
      " --set training.log_interval=1 --run-dir run & sup=$!;"
      " for i in $(seq 1200); do [ -s run/heartbeats/rank-00001 ] && [ -s run/metrics.jsonl ] && break; sleep 0.1;"
      " done; pid=$(cut -d' ' -f1 run/heartbeats/rank-00001); echo \"stopped $pid\"; kill -STOP $pid;"
      " start=$(date +%s);"
      " for i in $(seq 3000); do grep -q 'restart 1 of' .err 2>/dev/null && break; sleep 0.1; done;"
      " echo \"restarted after $(( $(date +%s) - start )) s\";"
      " for i in $(seq 1200); do [ $(grep -c '^memtrain: training' .stdout) -ge 2 ] && break; sleep 0.1; done;"
      " kill -TERM $sup; wait $sup; } 2>.err; rc=$?; cat .err >&2; exit $rc; }");
  EXPECT_EQ(r.exit_code, 143) << r.out << r.err;
  const auto at = r.out.find("stopped ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string pid = r.out.substr(at + 8, r.out.find('\n', at) - at - 8);
  EXPECT_TRUE(contains(r.err, "memtrain: health: world rank 1 (pid " + pid + ") stopped sending heartbeats")) << r.err;
  EXPECT_TRUE(contains(r.err, "health.stall_timeout = 8 s; world rank 0 ends the job (exit 1)")) << r.err;
  EXPECT_TRUE(contains(r.err, "; restart 1 of 1 in 0 s: ")) << r.err;
  EXPECT_TRUE(contains(r.out, "restarted after ")) << r.out;
}

}  // namespace
}  // namespace memtrain::cli
