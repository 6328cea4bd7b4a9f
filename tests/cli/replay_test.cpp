// `memtrain replay`: a trace against a policy on a simulated device. References: sizes and peaks
// computed by hand from the trace the test writes.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::Scratch;

// Live requested bytes: 1 MiB, then 3 MiB (peak), then 2 MiB after the first free.
const char* kTrace =
    "op,id,bytes,stream,tag\n"
    "alloc,a,1048576,0,activation\n"
    "alloc,b,2097152,0,activation\n"
    "free,a,,0,\n"
    "free,b,,0,\n";

TEST(Replay, JsonReportsTheTrace) {
  Scratch s;
  s.write("t.csv", kTrace);
  const auto r = s.memtrain("replay --trace t.csv --policy best_fit --capacity 1GiB --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("policy"), "best_fit");
  EXPECT_EQ(j.at("capacity_bytes"), 1073741824ull);  // 2^30
  EXPECT_EQ(j.at("events"), 4);
  EXPECT_EQ(j.at("num_ooms"), 0);
  EXPECT_GE(j.at("peak_allocated_bytes").get<std::uint64_t>(), 3u << 20);
  for (const char* key :
       {"peak_reserved_bytes", "utilization", "fragmentation", "first_oom_event", "num_alloc_retries"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
}

TEST(Replay, FailedAllocIsCountedAndReplayContinues) {
  Scratch s;
  s.write("t.csv", kTrace);
  const auto r = s.memtrain("replay --trace t.csv --policy no_cache --capacity 1536KiB --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("num_ooms"), 1);  // b (2 MiB) cannot fit in 1.5 MiB
  EXPECT_EQ(j.at("first_oom_event"), 1);
}

TEST(Replay, MalformedTraceExitsTwoWithTheLine) {
  Scratch s;
  s.write("t.csv", "op,id,bytes,stream,tag\nalloc,a,lots,0,x\n");
  const auto r = s.memtrain("replay --trace t.csv --policy best_fit --capacity 1GiB");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "memtrain: trace error: t.csv:2: "));
}

TEST(Replay, MissingTraceExitsTwo) {
  Scratch s;
  const auto r = s.memtrain("replay --trace none.csv --policy best_fit --capacity 1GiB");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "memtrain: trace error: "));
  EXPECT_TRUE(contains(r.err, "none.csv"));
}

TEST(Replay, ADirectoryForTheTraceIsNamedAsOne) {
  Scratch s;
  std::filesystem::create_directories(s.path("tr"));
  const auto r = s.memtrain("replay --trace tr --policy best_fit --capacity 1GiB");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "memtrain: trace error: tr: is a directory; expected a trace file (op,id,bytes,stream,tag, or "
            "RMM's log)\n");
}

// A request larger than the device (here 2^64 - 1 bytes, which no alignment can round) is an
// out-of-memory event under every policy, the offline plan included, and the replay goes on.
TEST(Replay, ARequestLargerThanTheDeviceIsAnOutOfMemoryEventUnderEveryPolicy) {
  Scratch s;
  s.write("t.csv", "op,id,bytes,stream,tag\nalloc,1,18446744073709551615,0,parameter\nalloc,2,1048576,0,x\n");
  for (const char* policy : {"no_cache", "pytorch", "best_fit", "vmm_stitch", "planned"}) {
    const auto r = s.memtrain(std::string("replay --trace t.csv --policy ") + policy + " --capacity 1GiB --json");
    ASSERT_EQ(r.exit_code, 0) << policy << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("num_ooms"), 1) << policy;
    EXPECT_EQ(j.at("first_oom_line"), 2) << policy;
    EXPECT_EQ(j.at("num_allocs"), 2) << policy;
    // The requested bytes live at once (the lower bound) saturate instead of wrapping 64 bits.
    EXPECT_EQ(j.at("peak_live_bytes").get<std::uint64_t>(), 18446744073709551615ull) << policy;
  }
  // Two requests of 2^63 bytes summed to 0 (wrapped): the lower bound is at least each of them.
  s.write("two.csv", "op,id,bytes,stream,tag\nalloc,1,9223372036854775808,0,x\nalloc,2,9223372036854775808,0,x\n");
  const auto two = s.memtrain("replay --trace two.csv --policy best_fit --capacity 1GiB --json");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(nlohmann::json::parse(two.out).at("peak_live_bytes").get<std::uint64_t>(), 18446744073709551615ull);
}

TEST(Replay, BadCapacityExitsTwo) {
  Scratch s;
  s.write("t.csv", kTrace);
  auto r = s.memtrain("replay --trace t.csv --policy best_fit --capacity 40XB");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "memtrain: config error: --capacity 40XB: "));
  r = s.memtrain("replay --trace t.csv --policy best_fit --capacity 0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "--capacity 0: zero; expected a positive size"));
  r = s.memtrain("replay --trace t.csv --policy best_fit --capacity 0.1");  // rounds down to 0 bytes
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "--capacity 0.1: under one byte; expected a positive size"));
  // The allocators' statistics are signed 64-bit: 4 EiB is the largest device they take.
  r = s.memtrain("replay --trace t.csv --policy no_cache --capacity 18446744073709551615");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "--capacity 18446744073709551615: larger than 4611686018427387904 bytes (4 EiB)"));
  EXPECT_EQ(s.memtrain("replay --trace t.csv --policy no_cache --capacity 4096TiB").exit_code, 0);
  // vmm_stitch keeps a record per 2 MiB page: a device above 1 TiB is refused before it runs the
  // host out of memory.
  r = s.memtrain("replay --trace t.csv --policy vmm_stitch --capacity 4096TiB");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "--capacity 4096TiB with --policy vmm_stitch: larger than 1 TiB"));
  EXPECT_EQ(s.memtrain("replay --trace t.csv --policy vmm_stitch --capacity 1TiB").exit_code, 0);
}

TEST(Replay, UnknownPolicyListsThePolicies) {
  Scratch s;
  s.write("t.csv", kTrace);
  const auto r = s.memtrain("replay --trace t.csv --policy first_fit --capacity 1GiB");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "--policy first_fit: unknown policy; expected one of "));
  EXPECT_TRUE(contains(r.err, "vmm_stitch"));
}

}  // namespace
}  // namespace memtrain::cli
