// memtrain top's views of a ledger snapshot: a job's figures are summed over its processes as
// pool_json documents, and the Prometheus text passes Debian's `promtool check metrics`.
#include "memory/pool_view.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

namespace memtrain::memory {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

LedgerSnapshot two_jobs() {
  LedgerSnapshot snap;
  snap.capacity_bytes = 1000 * MiB;
  LedgerEntry a;
  a.name = "run-a";
  a.key = "/runs/run-a";
  a.reservation = 100 * MiB;
  a.limit = kNoLimit;
  a.in_use_bytes = 70 * MiB;
  a.releases = 2;
  a.released_bytes = 12 * MiB;
  for (int r = 0; r < 2; ++r) {
    LedgerMember m;
    m.pid = 100 + r;
    m.in_use_bytes = (30 + 10 * r) * MiB;
    m.figures.allocated_bytes = (20 + r) * MiB;
    m.figures.reserved_bytes = (30 + 10 * r) * MiB;
    m.figures.releasable_bytes = (5 + r) * MiB;
    m.figures.step = 40 - r;
    m.figures.tokens_per_s = 1000;
    m.figures.state = JobState::training;
    m.figures.num_ooms = r;
    m.figures.policy = "best_fit";
    a.members.push_back(m);
  }
  LedgerEntry b;
  b.name = "run \"b\"";  // a quote must be escaped in a label
  b.key = "/runs/b\\x";
  b.limit = 200 * MiB;
  LedgerMember m;
  m.pid = 200;
  m.figures.state = JobState::waiting;
  b.members.push_back(m);
  snap.jobs = {a, b};
  snap.reserved_bytes = 100 * MiB;
  snap.committed_bytes = 100 * MiB;
  return snap;
}

TEST(PoolView, JsonSumsAJobOverItsProcesses) {
  const auto doc = pool_json("gpu0", "host1", two_jobs());
  EXPECT_EQ(doc["ledger"], "gpu0");
  EXPECT_EQ(doc["capacity_bytes"], 1000 * MiB);
  ASSERT_EQ(doc["jobs"].size(), 2u);
  const auto& a = doc["jobs"][0];
  EXPECT_EQ(a["run_dir"], "/runs/run-a");
  EXPECT_EQ(a["ranks"], 2);
  EXPECT_EQ(a["pids"], nlohmann::ordered_json({100, 101}));
  EXPECT_EQ(a["allocated_bytes"], 41 * MiB);   // 20 + 21
  EXPECT_EQ(a["reserved_bytes"], 70 * MiB);    // 30 + 40
  EXPECT_EQ(a["releasable_bytes"], 11 * MiB);  // 5 + 6
  EXPECT_EQ(a["charged_bytes"], 70 * MiB);
  EXPECT_EQ(a["step"], 39);  // the slower rank's
  EXPECT_EQ(a["tokens_per_s"], 2000.0);
  EXPECT_EQ(a["num_ooms"], 1);
  EXPECT_TRUE(a["limit_bytes"].is_null());
  EXPECT_EQ(a["per_rank"].size(), 2u);
  EXPECT_EQ(doc["jobs"][1]["state"], "waiting");
  EXPECT_EQ(doc["jobs"][1]["limit_bytes"], 200 * MiB);
}

TEST(PoolView, TableHasOneLinePerJob) {
  const std::string t = pool_table("gpu0", "host1", two_jobs());
  EXPECT_NE(t.find("capacity 1000.00 MiB"), std::string::npos) << t;
  EXPECT_NE(t.find("run-a"), std::string::npos) << t;
  EXPECT_NE(t.find("waiting"), std::string::npos) << t;
  EXPECT_EQ(std::count(t.begin(), t.end(), '\n'), 4);  // header, column names, two jobs
}

TEST(PoolView, PrometheusTextPassesPromtoolWithASeriesPerJob) {
  const std::string text = pool_prometheus("gpu0", "host1", two_jobs());
  EXPECT_NE(text.find("memtrain_job_allocated_bytes{ledger=\"gpu0\",host=\"host1\",job=\"run-a\",run_dir=\"/runs/"
                      "run-a\"} 42991616"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("job=\"run \\\"b\\\"\",run_dir=\"/runs/b\\\\x\""), std::string::npos) << text;
  const std::string path = ::testing::TempDir() + "pool_view_metrics_" + std::to_string(::getpid()) + ".txt";
  std::ofstream(path) << text;
  const std::string cmd = "promtool check metrics < '" + path + "' 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  const int status = ::pclose(p);
  std::remove(path.c_str());
  EXPECT_EQ(status, 0) << "promtool (scripts/install_deps.sh installs Debian's prometheus): " << out;
}

}  // namespace
}  // namespace memtrain::memory
