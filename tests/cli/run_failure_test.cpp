// Failures of a run that was set up correctly: exit 1 with one message, never an abort.
#include <gtest/gtest.h>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::kTinyMockYaml;
using testing::Scratch;

TEST(RunFailure, OutOfMemoryExitsOneWithTheAllocatorsMessage) {
  // 64 KiB cannot hold even the first 2 MiB segment of the allocator.
  Scratch s;
  s.write("exp.yaml", kTinyMockYaml);
  const auto r = s.memtrain("train --config exp.yaml --run-dir run --set memory.capacity=64KiB");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain: out of memory"));
  EXPECT_TRUE(contains(r.err, "capacity 64.00 KiB"));
}

// memory.limit (issue 3, "Quotas"): the job's allocator takes its memory through the host's
// shared ledger; a limit of 1 MiB cannot hold the allocator's first 2 MiB segment, so the run
// fails with the allocator's out-of-memory message, which names the limit and the key.
TEST(RunFailure, LimitBelowWhatTheModelNeedsExitsOneNamingTheLimit) {
  Scratch s;
  s.write("exp.yaml", kTinyMockYaml);
  const auto r = s.memtrain("train --config exp.yaml --run-dir run --set memory.limit=1MiB");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain: out of memory")) << r.err;
  EXPECT_TRUE(contains(r.err, "capacity 1.00 MiB")) << r.err;
  EXPECT_TRUE(contains(r.err, "memory.limit is 1048576 bytes (1.00 MiB)")) << r.err;
}

TEST(RunFailure, UncreatableRunDirectoryExitsOne) {
  Scratch s;
  s.write("exp.yaml", kTinyMockYaml);
  s.write("a-file", "");
  const auto r = s.memtrain("train --config exp.yaml --run-dir a-file/run");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain: error: "));
  EXPECT_TRUE(contains(r.err, "a-file/run"));
}

}  // namespace
}  // namespace memtrain::cli
