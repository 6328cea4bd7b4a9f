// `memtrain plan` and `train --dry-run` against QA's findings of issue 4: the config's
// memory.limit / memory.capacity cap the plan as they cap the dry run's allocator, bad device
// sizes are usage errors naming the flag, figures that have no meaning are n/a rather than
// numbers, needed_bytes is the unlimited demand (docs/memory-plan.md), the micro-batch search's
// ceiling is said, and per-layer activations under partial recompute are compared row by row.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::Scratch;

// hidden 64, 2 layers, intermediate 128, vocab 100, 32 positions; mock data so that
// `train --dry-run` needs no corpus.
const char* kYaml =
    "model:\n"
    "  vocab_size: 100\n"
    "  hidden_size: 64\n"
    "  num_hidden_layers: 2\n"
    "  num_attention_heads: 4\n"
    "  intermediate_size: 128\n"
    "  max_position_embeddings: 32\n"
    "data:\n"
    "  mock: true\n"
    "  seq_length: 32\n"
    "training:\n"
    "  micro_batch_size: 4\n"
    "  global_batch_size: 8\n"
    "  max_steps: 1\n";

nlohmann::json plan_json(const Scratch& s, const std::string& args, int expected_exit) {
  const auto r = s.memtrain("plan --config exp.yaml --json " + args);
  EXPECT_EQ(r.exit_code, expected_exit) << r.err;
  return nlohmann::json::parse(r.out);
}

std::string bytes_arg(std::int64_t b) { return std::to_string(b); }

// QA: `--set memory.limit=10GiB` was ignored by plan ("fits") while train --dry-run ran out of
// memory. The unlimited plan's reserved bytes are the reference: half of them as a limit cannot
// fit, twice them can, and the allocator capacity reported is the limit.
TEST(PlanLimits, MemoryLimitAndCapacityCapTheAllocator) {
  Scratch s;
  s.write("exp.yaml", kYaml);
  const auto free = plan_json(s, "--target a100-40gb", 0);
  const std::int64_t reserved = free["peak_reserved_bytes"].get<std::int64_t>();
  EXPECT_TRUE(free["allocator_limit_bytes"].is_null());

  const auto limited = plan_json(s, "--target a100-40gb --set memory.limit=" + bytes_arg(reserved / 2), 3);
  EXPECT_FALSE(limited["fits"].get<bool>());
  EXPECT_EQ(limited["allocator_capacity_bytes"].get<std::int64_t>(), reserved / 2);
  EXPECT_EQ(limited["allocator_limit_key"], "memory.limit");
  EXPECT_EQ(limited["max_micro_batch_size"].get<int>() < 4, true);

  const auto capped = plan_json(s, "--target a100-40gb --set memory.capacity=" + bytes_arg(2 * reserved), 0);
  EXPECT_TRUE(capped["fits"].get<bool>());
  EXPECT_EQ(capped["allocator_capacity_bytes"].get<std::int64_t>(), 2 * reserved);
  EXPECT_EQ(capped["allocator_limit_key"], "memory.capacity");

  const auto text =
      s.memtrain("plan --config exp.yaml --target a100-40gb --set memory.limit=" + bytes_arg(reserved / 2));
  EXPECT_EQ(text.exit_code, 3);
  EXPECT_TRUE(contains(text.out, "allocator cap"));
  EXPECT_TRUE(contains(text.err, "memory.limit = "));
  EXPECT_TRUE(contains(text.err, "caps the allocator at"));
}

// The same limit in train --dry-run also runs out of memory (exit 1): the two agree.
TEST(PlanLimits, DryRunWithTheSameLimitAgreesWithPlan) {
  Scratch s;
  s.write("exp.yaml", kYaml);
  const std::int64_t reserved = plan_json(s, "--target a100-40gb", 0)["peak_reserved_bytes"].get<std::int64_t>();
  const auto r = s.memtrain("train --config exp.yaml --run-dir run --dry-run --target a100-40gb --set memory.limit=" +
                            bytes_arg(reserved / 2));
  EXPECT_EQ(r.exit_code, 1) << r.err;
}

// QA: --non-allocator 41GiB on a 40 GiB target was exit 1 "capacity unbounded; ... 0 B".
TEST(PlanLimits, NonAllocatorNotBelowTheTargetIsAUsageError) {
  Scratch s;
  s.write("exp.yaml", kYaml);
  const char* expected = "--non-allocator 41.00 GiB is not smaller than the target's 40.00 GiB";
  const auto train = s.memtrain("train --config exp.yaml --run-dir run --dry-run --non-allocator 41GiB");
  EXPECT_EQ(train.exit_code, 2) << train.err;
  EXPECT_TRUE(contains(train.err, expected));
  const auto plan = s.memtrain("plan --config exp.yaml --target a100-40gb --non-allocator 41GiB");
  EXPECT_EQ(plan.exit_code, 2) << plan.err;
  EXPECT_TRUE(contains(plan.err, expected));
  const auto equal = s.memtrain("plan --config exp.yaml --target 2GiB --non-allocator 2GiB");
  EXPECT_EQ(equal.exit_code, 2) << equal.err;
  EXPECT_FALSE(std::filesystem::exists(s.path("run")));
}

TEST(PlanLimits, OversizedTargetSaysTheSizeDoesNotFitNotUnknownTarget) {
  Scratch s;
  s.write("exp.yaml", kYaml);
  for (const std::string verb : {"plan --config exp.yaml", "train --config exp.yaml --dry-run"}) {
    const auto r = s.memtrain(verb + " --target 99999999999999999999GiB");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(contains(r.err, "--target 99999999999999999999GiB: not a usable size"));
    EXPECT_TRUE(contains(r.err, "does not fit in 64 bits"));
    EXPECT_FALSE(contains(r.err, "unknown target"));
  }
}

// 2^63 bytes parsed but wrapped negative in the report ("needs 2.00 MiB of 0 B", fits); a plan
// simulates at most 1 PiB.
TEST(PlanLimits, TargetsAbove1PiBAreRefused) {
  Scratch s;
  s.write("exp.yaml", kYaml);
  for (const std::string target : {"9223372036854775808", "1025TiB"}) {
    const auto r = s.memtrain("plan --config exp.yaml --target " + target);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(contains(r.err, "--target " + target + ": above 1 PiB, the largest device a plan simulates")) << r.err;
  }
  EXPECT_EQ(s.memtrain("plan --config exp.yaml --target 1024TiB").exit_code, 0);
}

// A target's bytes are quoted escaped in plan and in a dry run (raw 0xff and ESC went to the
// terminal).
TEST(PlanLimits, ATargetOfBinaryBytesIsShownEscaped) {
  Scratch s;
  s.write("exp.yaml", kYaml);
  for (const std::string verb : {"plan --config exp.yaml", "train --config exp.yaml --dry-run"}) {
    const auto r = s.memtrain(verb + " --target \"$(printf '\\377\\033[2J')\"");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(contains(r.err, "--target \\xff\\x1b[2J: unknown target")) << r.err;
    EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << verb;
  }
}

// A dry run that asks for more than the simulated 1 PiB device (a 1M-token sequence with 1024
// heads: 8192 TiB of attention scores) is the plan's answer "does not fit" (exit 3), not an
// out-of-memory failure (exit 1).
TEST(PlanLimits, AStepBeyondTheSimulatedDeviceDoesNotFit) {
  Scratch s;
  s.write("exp.yaml", kYaml);
  const std::string huge =
      " --set model.max_position_embeddings=1048576 --set data.seq_length=1048576 --set model.num_attention_heads=1024"
      " --set model.hidden_size=1024";
  const auto r = s.memtrain("plan --config exp.yaml --target 40GiB" + huge);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain: plan: does not fit: needs more than the 1 PiB a plan simulates")) << r.err;
  const auto j = s.memtrain("plan --config exp.yaml --target 40GiB --json" + huge);
  EXPECT_EQ(j.exit_code, 3) << j.err;
  EXPECT_EQ(nlohmann::json::parse(j.out)["fits"], false);
}

// QA: "1411.8 % of the device" when the config does not fit: the unlimited replay's peak is
// not on this device.
TEST(PlanLimits, DeviceUtilizationIsNotAvailableWhenItDoesNotFit) {
  Scratch s;
  s.write("exp.yaml", kYaml);
  const auto j = plan_json(s, "--target 256KiB", 3);
  EXPECT_TRUE(j["device_utilization"].is_null());
  const auto r = s.memtrain("plan --config exp.yaml --target 256KiB");
  EXPECT_TRUE(contains(r.out, "n/a (does not fit) of the device"));
  const auto fits = plan_json(s, "--target 1GiB", 0);
  // peak allocated / capacity, by hand.
  EXPECT_DOUBLE_EQ(fits["device_utilization"].get<double>(),
                   fits["peak_allocated_bytes"].get<double>() / static_cast<double>(1LL << 30));
}

// docs/memory-plan.md: needed_bytes = peak reserved with no limit + non-allocator bytes. The
// reference is the plan on a target too large to constrain anything; the tight targets around
// it must report the same demand whatever their own replay reserved.
TEST(PlanLimits, NeededBytesIsTheUnlimitedDemandOnAnyTarget) {
  Scratch s;
  s.write("exp.yaml", kYaml);
  for (const char* policy : {"pytorch"}) {  // the policy QA saw it with
    const auto free = plan_json(s, std::string("--policy ") + policy + " --target 1TiB", 0);
    const std::int64_t demand = free["peak_reserved_bytes"].get<std::int64_t>();
    EXPECT_EQ(free["needed_bytes"].get<std::int64_t>(), demand);
    for (const std::int64_t target : {demand - (demand / 10), demand - 1}) {
      const auto r = s.memtrain("plan --config exp.yaml --json --policy " + std::string(policy) + " --target " +
                                bytes_arg(target));
      const auto j = nlohmann::json::parse(r.out);
      EXPECT_EQ(j["needed_bytes"].get<std::int64_t>(), demand) << policy << " at " << target;
      EXPECT_EQ(j["fits"].get<bool>(), r.exit_code == 0);
    }
    const auto gpu = plan_json(s, std::string("--policy ") + policy + " --target a100-40gb", 0);
    EXPECT_EQ(gpu["needed_bytes"].get<std::int64_t>(), demand + gpu["non_allocator_bytes"].get<std::int64_t>());
  }
}

// A model so small that micro-batch 65536 still fits: the search stops there and says so.
TEST(PlanLimits, LargestMicroBatchAtTheSearchCeilingIsALowerBound) {
  Scratch s;
  s.write("exp.yaml",
          "model:\n  vocab_size: 16\n  hidden_size: 8\n  num_hidden_layers: 1\n  "
          "num_attention_heads: 2\n"
          "  intermediate_size: 16\n  max_position_embeddings: 8\n"
          "data:\n  mock: true\n  seq_length: 8\n"
          "training:\n  micro_batch_size: 1\n  global_batch_size: 1\n  max_steps: 1\n  eval_steps: "
          "1\n");
  const auto j = plan_json(s, "--target 1TiB", 0);
  EXPECT_EQ(j["max_micro_batch_size"].get<int>(), 65536);
  EXPECT_TRUE(j["max_micro_batch_size_is_lower_bound"].get<bool>());
  const auto r = s.memtrain("plan --config exp.yaml --target 1TiB");
  EXPECT_TRUE(contains(r.out, "largest micro-batch that fits: at least 65536"));
  s.write("exp.yaml", kYaml);
  EXPECT_FALSE(plan_json(s, "--target 1GiB", 0)["max_micro_batch_size_is_lower_bound"].get<bool>());
}

TEST(PlanLimits, TextReportExplainsFragmentationAndListsTagsWithoutATrailingSeparator) {
  Scratch s;
  s.write("exp.yaml", kYaml);
  const auto r = s.memtrain("plan --config exp.yaml --target 1GiB");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "(1 - largest free block / free bytes in reserved segments, at peak reserved)"));
  const auto at = r.out.find("peak per tag");
  ASSERT_NE(at, std::string::npos);
  const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
  EXPECT_NE(line.back(), ';') << line;
  EXPECT_NE(line.back(), ' ') << line;
  EXPECT_TRUE(contains(line, "activation "));
}

TEST(PlanLimits, WorldSizeThatIsNotAPositiveIntegerSaysWhatWasExpected) {
  Scratch s;
  s.write("exp.yaml", kYaml);
  for (const char* bad : {"two", "0", "-1", "2x", "99999999999", "1048577"}) {
    const auto r = s.memtrain(std::string("plan --config exp.yaml --target 1GiB --world-size ") + bad);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_TRUE(contains(r.err, std::string("--world-size ") + bad + ": expected an integer in [1, 1048576]")) << bad;
  }
}

// QA: `--world-size 3` gave a config error without where it came from.
TEST(PlanLimits, WorldSizeThatDoesNotDivideTheBatchNamesTheFlagAndTheKeysLine) {
  Scratch s;
  s.write("exp.yaml", kYaml);
  const auto r = s.memtrain("plan --config exp.yaml --target 1GiB --world-size 3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "--world-size 3: "));
  EXPECT_TRUE(contains(r.err, "exp.yaml:13: training.global_batch_size = 8"));
  EXPECT_TRUE(contains(r.err, "4 x 3 = 12"));
}

// QA: with full recompute on every 4th layer, the measured figure of a stored layer was put
// beside full recompute's 2sbh (ratio 48). Each kind now stands beside its own row; fp32, so a
// checkpointed layer keeps its input in 4 bytes: 4sbh / 2sbh = 2; a stored layer keeps
// 4(16sbh + as^2b) + 16sb against sbh(34 + 5as/h) (docs/memory-plan.md; intermediate 4h as
// there, so the MLP keeps 8sbh elements).
TEST(PlanLimits, PartialRecomputeComparesEachKindOfLayerWithItsOwnRow) {
  Scratch s;
  s.write("exp.yaml", kYaml);
  const auto j = plan_json(s,
                           "--target 1GiB --set model.num_hidden_layers=4 --set memory.recompute=full "
                           "--set memory.recompute_num_layers=2 --set model.intermediate_size=256",
                           0);
  const double sq = 32, b = 4, h = 64, a = 4, sbh = sq * b * h;
  EXPECT_EQ(j["checkpointed_layers"].get<int>(), 2);
  EXPECT_TRUE(j["activation_bytes_per_layer"].is_null());
  EXPECT_EQ(j["activation_bytes_per_checkpointed_layer"].get<double>(), 4 * sbh);
  const double stored = 4 * (16 * sbh + a * sq * sq * b) + 16 * sq * b;
  EXPECT_EQ(j["activation_bytes_per_non_checkpointed_layer"].get<double>(), stored);
  EXPECT_DOUBLE_EQ(j["analytic"]["checkpointed_layer_ratio"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["analytic"]["non_checkpointed_layer_ratio"].get<double>(), stored / (sbh * (34 + 5 * a * sq / h)));
  EXPECT_TRUE(j["analytic"]["activation_per_layer_ratio"].is_null());
  const auto r = s.memtrain(
      "plan --config exp.yaml --target 1GiB --set model.num_hidden_layers=4 --set "
      "memory.recompute=full "
      "--set memory.recompute_num_layers=2 --set model.intermediate_size=256");
  EXPECT_TRUE(contains(r.out, "per stored layer"));
  EXPECT_TRUE(contains(r.out, "per checkpointed (2 of 4) layer"));
  EXPECT_TRUE(contains(r.out, "Korthikanti 2sbh"));
}

}  // namespace
}  // namespace memtrain::cli
