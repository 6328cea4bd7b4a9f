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
