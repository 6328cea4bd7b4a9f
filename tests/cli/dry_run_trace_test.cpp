// `train --dry-run` allocates exactly what `train` does (design.md, "Execution modes"; issue 4,
// "Dry run"): the same config trained for real and dry-run on a simulated device records the
// same allocation trace, event for event, for every precision / recompute / attention setting
// and allocator policy. The reference is the compute run itself, on the host's real memory.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/run_memtrain.hpp"

#if MEMTRAIN_HAVE_CUDA
#include "memory/cuda_resource.hpp"
#endif

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::Scratch;
using testing::slurp;

// Two accumulation steps, dropout on, an eval every step: every allocation path of the loop.
const char* kTraceYaml =
    "model:\n"
    "  vocab_size: 96\n"
    "  hidden_size: 32\n"
    "  num_hidden_layers: 2\n"
    "  num_attention_heads: 4\n"
    "  intermediate_size: 64\n"
    "  max_position_embeddings: 32\n"
    "  hidden_dropout_prob: 0.1\n"
    "  attention_probs_dropout_prob: 0.1\n"
    "data:\n"
    "  mock: true\n"
    "  seq_length: 24\n"
    "training:\n"
    "  micro_batch_size: 3\n"
    "  global_batch_size: 6\n"
    "  max_steps: 3\n"
    "  eval_steps: 2\n"
    "  eval_interval: 2\n"
    "  log_interval: 1\n"
    "memory:\n"
    "  trace: true\n";

// One row of memory_trace.csv: op,id,bytes,stream,tag (no time, no address).
std::vector<std::string> trace_rows(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> rows;
  for (std::string line; std::getline(in, line);) rows.push_back(line);
  return rows;
}

std::string peak_line(const std::string& out) {
  const auto at = out.find("peak memory");
  return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
}

struct Setting {
  const char* name;
  const char* sets;  // --set arguments
};

class DryRunTrace : public ::testing::TestWithParam<Setting> {};

TEST_P(DryRunTrace, EqualsTheComputeRunEventForEvent) {
  Scratch s;
  s.write("exp.yaml", kTraceYaml);
  const std::string sets = GetParam().sets;
  const auto real = s.memtrain("train --config exp.yaml --run-dir real " + sets);
  // Every setting listed is built: one the config rejects is a regression, not a skip.
  ASSERT_EQ(real.exit_code, 0) << "setting '" << GetParam().name << "' rejected: " << real.err;
  const auto dry = s.memtrain("train --config exp.yaml --run-dir dry --dry-run --target 1GiB " + sets);
  ASSERT_EQ(dry.exit_code, 0) << dry.err;

  const auto real_rows = trace_rows(s.path("real/memory_trace.csv"));
  const auto dry_rows = trace_rows(s.path("dry/memory_trace.csv"));
  ASSERT_GT(real_rows.size(), 200u);  // the loop really ran: 3 steps x 2 micro-batches + evals
  ASSERT_EQ(real_rows.size(), dry_rows.size());
  for (std::size_t i = 0; i < real_rows.size(); ++i) {
    ASSERT_EQ(real_rows[i], dry_rows[i]) << "first difference at trace row " << i;
  }
  EXPECT_EQ(peak_line(real.out), peak_line(dry.out));
  EXPECT_FALSE(peak_line(real.out).empty());
}

// Settings of issues 4, 5 and 11; a setting joins the list when it lands (compression), never
// before. Tensor parallelism's traces are compared on every rank in train_mpi_tests.
INSTANTIATE_TEST_SUITE_P(
    EverySetting, DryRunTrace,
    ::testing::Values(
        Setting{"fp32", ""}, Setting{"pytorch_policy", "--set memory.policy=pytorch"},
        Setting{"vmm_stitch", "--set memory.policy=vmm_stitch"},
        Setting{"expandable_segments", "--set memory.expandable_segments=true"},
        Setting{"dynamic_seq_length", "--set data.dynamic_seq_length=true"},
        Setting{"fp16", "--set precision.dtype=fp16"}, Setting{"bf16", "--set precision.dtype=bf16"},
        Setting{"bf16_fp32_grads", "--set precision.dtype=bf16 --set precision.fp32_grad_accumulation=true"},
        Setting{"selective", "--set memory.recompute=selective"}, Setting{"full", "--set memory.recompute=full"},
        Setting{"full_block_1",
                "--set memory.recompute=full --set memory.recompute_method=block "
                "--set memory.recompute_num_layers=1"},
        Setting{"flash", "--set memory.attention=flash"},
        Setting{"fp16_full_flash",
                "--set precision.dtype=fp16 --set memory.recompute=full "
                "--set memory.attention=flash"},
        Setting{"small_buckets", "--set parallel.bucket_size_mb=0.01"}, Setting{"zero1", "--set parallel.zero_stage=1"},
        Setting{"zero1_bf16", "--set parallel.zero_stage=1 --set precision.dtype=bf16"}),
    [](const ::testing::TestParamInfo<Setting>& info) { return std::string(info.param.name); });

// The row without its stream column: a GPU run allocates on its device's compute stream, a dry
// run on the default stream; the allocations themselves must be the same.
std::string without_stream(const std::string& row) {
  std::vector<std::string> fields;
  std::stringstream in(row);
  for (std::string f; std::getline(in, f, ',');) fields.push_back(f);
  if (fields.size() < 4) return row;
  std::string out;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i == 3) continue;
    out += (out.empty() ? "" : ",") + fields[i];
  }
  return out;
}

// Issue 14: a run on a GPU (fp32: what a GPU trains so far) allocates what its dry run predicts,
// event for event but for the stream. Skipped where no GPU exists.
TEST(DryRunTraceOnGpu, EqualsTheGpuRunEventForEvent) {
#if MEMTRAIN_HAVE_CUDA
  if (memory::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: " << memory::cuda_unavailable_reason();
  for (const char* sets : {"", "--set memory.attention=flash --set memory.recompute=full"}) {
    Scratch s;
    s.write("exp.yaml", kTraceYaml);
    const auto real = s.memtrain(std::string("train --config exp.yaml --run-dir real --set device=cuda ") + sets);
    ASSERT_EQ(real.exit_code, 0) << real.err;
    const auto dry = s.memtrain(std::string("train --config exp.yaml --run-dir dry --dry-run --target 1GiB "
                                            "--set device=cuda ") +
                                sets);
    ASSERT_EQ(dry.exit_code, 0) << dry.err;
    const auto real_rows = trace_rows(s.path("real/memory_trace.csv"));
    const auto dry_rows = trace_rows(s.path("dry/memory_trace.csv"));
    ASSERT_GT(real_rows.size(), 200u);
    ASSERT_EQ(real_rows.size(), dry_rows.size()) << sets;
    for (std::size_t i = 0; i < real_rows.size(); ++i) {
      ASSERT_EQ(without_stream(real_rows[i]), without_stream(dry_rows[i])) << "first difference at trace row " << i;
    }
  }
#else
  GTEST_SKIP() << "no CUDA device: this memtrain was built without CUDA";
#endif
}

TEST(DryRun, MetricsCarryNoLossAndTheRunSaysItIsDry) {
  Scratch s;
  s.write("exp.yaml", kTraceYaml);
  const auto r = s.memtrain("train --config exp.yaml --run-dir dry --dry-run --target a100-40gb");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "dry run on simulated a100-40gb (40.00 GiB)"));
  std::ifstream in(s.path("dry/metrics.jsonl"));
  int training_lines = 0;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) {
      ++training_lines;
      EXPECT_TRUE(j["loss"].is_null()) << line;
      EXPECT_GT(j["peak_allocated_bytes"].get<long long>(), 0) << line;
    }
    if (j.contains("eval_loss")) {
      EXPECT_TRUE(j["eval_loss"].is_null()) << line;
    }
  }
  EXPECT_EQ(training_lines, 3);
}

// A dry run into a directory that holds a run logged every step a second time (with null
// losses) and replaced its memory snapshot; --resume required with --dry-run was ignored.
// Both are refused (exit 2) and the directory is left as it was.
TEST(DryRun, RefusesADirectoryHoldingARunAndARequiredResume) {
  Scratch s;
  s.write("exp.yaml", kTraceYaml);
  ASSERT_EQ(s.memtrain("train --config exp.yaml --run-dir real").exit_code, 0);
  const std::string metrics = slurp(s.path("real/metrics.jsonl"));
  const std::string snapshot = slurp(s.path("real/memory_snapshot.json"));
  const auto into = s.memtrain("train --config exp.yaml --run-dir real --dry-run");
  EXPECT_EQ(into.exit_code, 2) << into.err;
  EXPECT_TRUE(contains(into.err, "--dry-run: run directory real already holds a run (run.json)")) << into.err;
  EXPECT_EQ(slurp(s.path("real/metrics.jsonl")), metrics);
  EXPECT_EQ(slurp(s.path("real/memory_snapshot.json")), snapshot);
  const auto resume = s.memtrain("train --config exp.yaml --run-dir fresh --dry-run --resume required");
  EXPECT_EQ(resume.exit_code, 2) << resume.err;
  EXPECT_TRUE(contains(resume.err, "--resume required loads a checkpoint, and --dry-run loads none")) << resume.err;
  EXPECT_FALSE(std::filesystem::exists(s.path("fresh")));
}

TEST(DryRun, UnknownTargetIsAUsageErrorNamingTheTargets) {
  Scratch s;
  s.write("exp.yaml", kTraceYaml);
  const auto r = s.memtrain("train --config exp.yaml --dry-run --target a100-41gb");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "--target a100-41gb: unknown target; expected a100-40gb, a100-80gb"));
}

// An empty --target (an unset shell variable) silently simulated the default a100-40gb.
TEST(DryRun, AnEmptyTargetIsAUsageError) {
  Scratch s;
  s.write("exp.yaml", kTraceYaml);
  const auto r = s.memtrain("train --config exp.yaml --dry-run --target '' --run-dir d");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err,
                       "--target: empty; expected a value, as `memtrain train --help` says: Simulated device "
                       "of --dry-run: a100-40gb"))
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(s.path("d")));
}

TEST(DryRun, TargetWithoutDryRunIsAUsageError) {
  Scratch s;
  s.write("exp.yaml", kTraceYaml);
  const auto r = s.memtrain("train --config exp.yaml --target a100-40gb");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "--target needs --dry-run"));
}

// A device too small for the model's states fails while the model is built, before the run
// directory exists (Note [No half-written run directory] in trainer.cpp): out of memory, exit 1,
// naming the simulated target.
TEST(DryRun, TargetTooSmallForTheModelIsOutOfMemoryBeforeTheRunDirectory) {
  Scratch s;
  s.write("exp.yaml", kTraceYaml);
  const auto r = s.memtrain("train --config exp.yaml --run-dir dry --dry-run --target 64KiB");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "out of memory on simulated 64KiB (64.00 KiB)"));
  EXPECT_FALSE(std::ifstream(s.path("dry/config.yaml")).good());
}

// One that holds the model but not a step's activations fails in the step, as the real device
// would, and leaves the memory snapshot and trace that explain it.
TEST(DryRun, StepTooLargeForTheTargetKeepsTheSnapshot) {
  Scratch s;
  s.write("exp.yaml", kTraceYaml);
  const auto r = s.memtrain(
      "train --config exp.yaml --run-dir dry --dry-run --target 4MiB --set training.micro_batch_size=64 "
      "--set training.global_batch_size=64");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "out of memory on simulated 4MiB"));
  EXPECT_TRUE(std::ifstream(s.path("dry/memory_snapshot.json")).good());
  EXPECT_TRUE(std::ifstream(s.path("dry/memory_trace.csv")).good());
}

}  // namespace
}  // namespace memtrain::cli
