// Failures of a run that was set up correctly: exit 1 with one message, never an abort.
#include <gtest/gtest.h>

#include <filesystem>

#include "memory/shared_ledger.hpp"
#include "tests/cli/run_memtrain.hpp"
#include "tests/memory/ledger_test_util.hpp"

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::kTinyMockYaml;
using testing::Scratch;
using testing::slurp;

TEST(RunFailure, OutOfMemoryExitsOneWithTheAllocatorsMessage) {
  // 64 KiB cannot hold even the first 2 MiB segment of the allocator.
  Scratch s;
  const memory::testing::ScopedDevice ledger;  // memory.capacity joins a ledger: a ledger of its own
  s.write("exp.yaml", kTinyMockYaml);
  const auto r = s.memtrain("train --config exp.yaml --run-dir run --set memory.capacity=64KiB --set memory.ledger=" +
                            ledger.name);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain: out of memory"));
  EXPECT_TRUE(contains(r.err, "capacity 64.00 KiB"));
}

// memory.limit (issue 3, "Quotas"): the job's allocator takes its memory through the host's
// shared ledger; a limit of 1 MiB cannot hold the allocator's first 2 MiB segment, so the run
// fails with the allocator's out-of-memory message, which names the limit and the key.
TEST(RunFailure, LimitBelowWhatTheModelNeedsExitsOneNamingTheLimit) {
  Scratch s;
  const memory::testing::ScopedDevice ledger;  // never the host's memtrain-ledger-cpu
  s.write("exp.yaml", kTinyMockYaml);
  const auto r = s.memtrain(
      "train --config exp.yaml --run-dir run --set memory.limit=1MiB "
      "--set memory.ledger=" +
      ledger.name);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain: out of memory")) << r.err;
  EXPECT_TRUE(contains(r.err, "capacity 1.00 MiB")) << r.err;
  EXPECT_TRUE(contains(r.err, "memory.limit is 1048576 bytes (1.00 MiB)")) << r.err;
}

// A ledger whose job is still in it with another capacity refuses a job of another capacity
// (a config error naming the key), and is that ledger's problem only: a job naming its own ledger
// never reads it. Once its last job has left, the next job's capacity becomes the ledger's.
TEST(RunFailure, ALedgerOfAnotherCapacityRefusesOnlyWhileAJobIsInIt) {
  Scratch s;
  const memory::testing::ScopedDevice busy, own;
  memory::SharedLedger other(busy.name, std::size_t{3} << 20);  // 3 MiB: fits nothing
  const auto member = other.join({"other job", 0, memory::kNoLimit});
  s.write("exp.yaml", kTinyMockYaml);
  const std::string job = "train --config exp.yaml --set memory.limit=64MiB --set memory.capacity=1GiB ";
  const auto clash = s.memtrain(job + "--run-dir clash --set memory.ledger=" + busy.name);
  EXPECT_EQ(clash.exit_code, 2) << clash.err;  // another capacity: a config error naming the key
  EXPECT_TRUE(contains(clash.err, "memory.capacity")) << clash.err;
  const auto r = s.memtrain(job + "--run-dir run --set memory.ledger=" + own.name);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  other.leave(member);
  const auto after = s.memtrain(job + "--run-dir after --set memory.ledger=" + busy.name);
  EXPECT_EQ(after.exit_code, 0) << after.err;
}

TEST(RunFailure, LedgerNameOutsideItsAlphabetExitsTwoNamingTheKey) {
  Scratch s;
  s.write("exp.yaml", kTinyMockYaml);
  const auto r = s.memtrain("train --config exp.yaml --run-dir run --set 'memory.ledger=a/b'");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "memory.ledger")) << r.err;
  EXPECT_TRUE(contains(r.err, "[A-Za-z0-9._-]")) << r.err;
  EXPECT_FALSE(std::filesystem::exists(s.path("run")));
}

// A file where a parent directory of --run-dir belongs is a wrong path, as --run-dir naming a
// file is: exit 2, nothing created.
TEST(RunFailure, ARunDirectoryBelowAFileIsAUsageError) {
  Scratch s;
  s.write("exp.yaml", kTinyMockYaml);
  s.write("a-file", "");
  const auto r = s.memtrain("train --config exp.yaml --run-dir a-file/run");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain: config error: cannot create run directory a-file/run: ")) << r.err;
  EXPECT_TRUE(contains(r.err, "(a part of the path is a file); expected a directory path (--run-dir)")) << r.err;
  EXPECT_EQ(slurp(s.path("a-file")), "");
}

}  // namespace
}  // namespace memtrain::cli
