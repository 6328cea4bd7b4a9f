// precision.bf16_gemm: auto as a user meets it (Note [bf16_gemm: auto measures the step's
// GEMMs]): the run header shows the path chosen and both measured speeds, meta.json records the
// path, a resume keeps it even when the measurement would now prefer the other one (forced
// with MEMTRAIN_BF16_GEMM_PREFER, so that no test depends on timing), and every rank of an
// mpirun job takes rank 0's choice. The references are runs with the path set explicitly and
// uninterrupted runs, compared bit for bit. Measuring needs oneDNN's bf16 matmul, which runs
// only where the CPU has bf16 dot products; the decision itself is tested everywhere
// (tests/train/bf16_gemm_choice_test.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/cpu/matmul_bf16.hpp"
#include "runtime/checkpoint/manifest.hpp"
#include "tests/cli/checkpoint_config.hpp"
#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

namespace fs = std::filesystem;
using testing::checkpoint_config;
using testing::contains;
using testing::expect_same_state;
using testing::losses;
using testing::Scratch;
using testing::slurp;

const char* kBf16 = "precision:\n  dtype: bf16\n";
const char* kChoseFp32 = "memtrain: bf16 GEMMs: auto chose fp32 sgemm: ";
const char* kChoseNative = "memtrain: bf16 GEMMs: auto chose oneDNN bf16: ";

std::string prefer(const std::string& path) { return "MEMTRAIN_BF16_GEMM_PREFER=" + path; }

// meta.json "bf16_gemm" of run_dir's checkpoint of `step` ("" when absent).
std::string recorded(const Scratch& s, const std::string& run_dir, int step) {
  char dir[40];
  std::snprintf(dir, sizeof dir, "/checkpoints/step-%08d/meta.json", step);
  const auto meta = nlohmann::json::parse(slurp(s.path(run_dir + dir)));
  return meta.contains("bf16_gemm") ? meta["bf16_gemm"].get<std::string>() : "";
}

#define SKIP_WITHOUT_BF16_DOT_PRODUCTS()                                                                    \
  if (!kernels::bf16_gemm_native()) {                                                                       \
    GTEST_SKIP() << "no bf16 dot products here (" << kernels::bf16_gemm_description()                       \
                 << "): auto takes the fp32 path without measuring, and oneDNN runs no native bf16 matmul"; \
  }

// The header names the choice and both speeds; the choice is recorded; the precision line and
// the summary say the same path.
TEST(Bf16GemmAuto, TheHeaderShowsTheChoiceAndBothSpeedsAndMetaRecordsIt) {
  SKIP_WITHOUT_BF16_DOT_PRODUCTS();
  Scratch s;
  const std::string cfg = checkpoint_config(s, "c.yaml", 2, 2, kBf16);
  const auto forced = s.memtrain("train --config " + cfg + " --run-dir fp32", prefer("fp32"));
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_TRUE(contains(forced.out, kChoseFp32));
  EXPECT_TRUE(contains(forced.out, " GFLOP/s against oneDNN bf16 "));
  EXPECT_TRUE(contains(forced.out, " GFLOP/s on the step's shapes "));
  EXPECT_TRUE(contains(forced.out, "; MEMTRAIN_BF16_GEMM_PREFER=fp32 decided\n"));
  EXPECT_TRUE(contains(
      forced.out, "memtrain: precision bf16 (GEMMs in fp32 on converted operands, by precision.bf16_gemm: auto; "));
  EXPECT_TRUE(contains(forced.out, "  precision        bf16, fp32 sgemm GEMMs (auto: measured "));
  EXPECT_EQ(recorded(s, "fp32", 2), "fp32");

  // Left to the measurement: one of the two, the one meta.json records.
  const auto free = s.memtrain("train --config " + cfg + " --run-dir free");
  ASSERT_EQ(free.exit_code, 0) << free.err;
  EXPECT_FALSE(contains(free.out, "MEMTRAIN_BF16_GEMM_PREFER"));
  const std::string path = recorded(s, "free", 2);
  ASSERT_TRUE(path == "native" || path == "fp32") << path;
  EXPECT_TRUE(contains(free.out, path == "native" ? kChoseNative : kChoseFp32));
}

// The paths differ in their bits (else the rest of this file would test nothing), and a resume
// keeps the recorded one although the measurement now prefers the other: the resumed run is
// the uninterrupted run, bit for bit.
TEST(Bf16GemmAuto, AResumeKeepsTheRecordedPathAndIsBitwiseTheUninterruptedRun) {
  SKIP_WITHOUT_BF16_DOT_PRODUCTS();
  Scratch s;
  const std::string cfg = checkpoint_config(s, "c.yaml", 4, 2, kBf16);
  for (const std::string first : {"native", "fp32"}) {
    const std::string other = first == "native" ? "fp32" : "native";
    const std::string straight = "straight-" + first, killed = "killed-" + first;
    ASSERT_EQ(s.memtrain("train --config " + cfg + " --run-dir " + straight, prefer(first)).exit_code, 0);
    const auto kill =
        s.memtrain("train --config " + cfg + " --run-dir " + killed, prefer(first) + " MEMTRAIN_FAULT=kill_at_step=3");
    ASSERT_EQ(kill.exit_code, 137) << kill.err;
    EXPECT_EQ(recorded(s, killed, 2), first);
    const auto r = s.memtrain("train --config " + cfg + " --run-dir " + killed, prefer(other));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "resumed from checkpoint " + killed + "/checkpoints/step-00000002 (step 2)"));
    EXPECT_TRUE(contains(r.out, std::string("memtrain: bf16 GEMMs: auto keeps the checkpoint's ") +
                                    (first == "native" ? "oneDNN bf16" : "fp32 sgemm") + " (meta.json bf16_gemm)"));
    EXPECT_FALSE(contains(r.out, "bf16 GEMMs: auto chose"));
    EXPECT_EQ(losses(s, killed), losses(s, straight)) << first;
    expect_same_state(s, straight, killed, 4);
    EXPECT_EQ(recorded(s, killed, 4), first);
  }
  EXPECT_NE(slurp(s.path("straight-native/checkpoints/step-00000004/optimizer-tp00.safetensors")),
            slurp(s.path("straight-fp32/checkpoints/step-00000004/optimizer-tp00.safetensors")));
}

// An explicit path measures nothing and wins over the checkpoint's record, saying so; its
// checkpoints record the path it used, which a later auto resume keeps. The run with fp32
// throughout is the reference of a run that switched to fp32 at step 2 only where the paths
// agree, so only the record and the header are checked here.
TEST(Bf16GemmAuto, AnExplicitPathOverridesAndIsRecorded) {
  SKIP_WITHOUT_BF16_DOT_PRODUCTS();
  Scratch s;
  const std::string two = checkpoint_config(s, "two.yaml", 2, 2, kBf16);
  const std::string four = checkpoint_config(s, "four.yaml", 4, 2, kBf16);
  const std::string six = checkpoint_config(s, "six.yaml", 6, 2, kBf16);
  const auto native =
      s.memtrain("train --config " + two + " --run-dir run --set precision.bf16_gemm=native", prefer("fp32"));
  ASSERT_EQ(native.exit_code, 0) << native.err;
  EXPECT_FALSE(contains(native.out, "memtrain: bf16 GEMMs:"));  // not measured, nothing overridden
  EXPECT_TRUE(contains(native.out, "memtrain: precision bf16 (GEMMs in bf16: "));
  EXPECT_EQ(recorded(s, "run", 2), "native");

  const auto fp32 = s.memtrain("train --config " + four + " --run-dir run --set precision.bf16_gemm=fp32");
  ASSERT_EQ(fp32.exit_code, 0) << fp32.err;
  EXPECT_TRUE(contains(fp32.out,
                       "memtrain: bf16 GEMMs: precision.bf16_gemm: fp32 overrides the checkpoint's oneDNN bf16: the "
                       "run continues within rounding, not bitwise\n"));
  EXPECT_EQ(recorded(s, "run", 4), "fp32");

  const auto resumed = s.memtrain("train --config " + six + " --run-dir run", prefer("native"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(contains(resumed.out, "memtrain: bf16 GEMMs: auto keeps the checkpoint's fp32 sgemm"));
  EXPECT_EQ(recorded(s, "run", 6), "fp32");
}

// A checkpoint from before the record resumes as auto did then (oneDNN where the CPU has bf16
// dot products), without measuring: bitwise the run that was oneDNN throughout.
TEST(Bf16GemmAuto, ACheckpointWithoutTheRecordResumesOnOneDnn) {
  SKIP_WITHOUT_BF16_DOT_PRODUCTS();
  Scratch s;
  const std::string cfg = checkpoint_config(s, "c.yaml", 4, 2, kBf16);
  ASSERT_EQ(s.memtrain("train --config " + cfg + " --run-dir straight --set precision.bf16_gemm=native").exit_code, 0);
  ASSERT_EQ(s.memtrain("train --config " + cfg + " --run-dir old", prefer("native") + " MEMTRAIN_FAULT=kill_at_step=3")
                .exit_code,
            137);
  // meta.json as a checkpoint from before the field was written, its checksum recomputed.
  const std::string dir = s.path("old/checkpoints/step-00000002");
  auto meta = nlohmann::json::parse(slurp(dir + "/meta.json"));
  ASSERT_EQ(meta.erase("bf16_gemm"), 1u);
  std::ofstream(dir + "/meta.json") << meta.dump(2);
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename() != "manifest.json") files.push_back(e.path().filename().string());
  }
  std::ofstream(dir + "/manifest.json") << checkpoint::manifest_json(checkpoint::compute_manifest(dir, files));
  const auto r = s.memtrain("train --config " + cfg + " --run-dir old", prefer("fp32"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out,
                       "memtrain: bf16 GEMMs: auto keeps oneDNN bf16, not measured: the checkpoint records no "
                       "bf16_gemm"));
  EXPECT_EQ(losses(s, "old"), losses(s, "straight"));
  expect_same_state(s, "straight", "old", 4);
  EXPECT_EQ(recorded(s, "old", 4), "native");
}

// Rank 0 measures and broadcasts: with the measurement forced to fp32 the other rank, whose
// model was built for oneDNN, must switch too, or its half of the gradient differs from the
// run with fp32 set explicitly on both. Left to the measurement, the job is bitwise the
// explicit run of the path it recorded.
TEST(Bf16GemmAuto, EveryRankTakesRankZerosChoice) {
  SKIP_WITHOUT_BF16_DOT_PRODUCTS();
  Scratch s;
  std::string text = slurp(checkpoint_config(s, "dp.yaml", 2, 2, kBf16));
  text.replace(text.find("  global_batch_size: 2\n"), 23, "  global_batch_size: 4\n");
  const std::string cfg = s.write("dp.yaml", text);
  const auto forced = s.mpirun(2, "train --config " + cfg + " --run-dir forced", prefer("fp32"));
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_TRUE(contains(forced.out, kChoseFp32));
  const auto fp32 = s.mpirun(2, "train --config " + cfg + " --run-dir fp32 --set precision.bf16_gemm=fp32");
  ASSERT_EQ(fp32.exit_code, 0) << fp32.err;
  expect_same_state(s, "fp32", "forced", 2);
  EXPECT_EQ(recorded(s, "forced", 2), "fp32");

  const auto free = s.mpirun(2, "train --config " + cfg + " --run-dir free");
  ASSERT_EQ(free.exit_code, 0) << free.err;
  const std::string path = recorded(s, "free", 2);
  ASSERT_TRUE(path == "native" || path == "fp32") << path;
  const auto same = s.mpirun(2, "train --config " + cfg + " --run-dir explicit --set precision.bf16_gemm=" + path);
  ASSERT_EQ(same.exit_code, 0) << same.err;
  expect_same_state(s, "explicit", "free", 2);
}

// A dry run does not measure: it assumes oneDNN, and says so.
TEST(Bf16GemmAuto, ADryRunAssumesOneDnnWithoutMeasuring) {
  SKIP_WITHOUT_BF16_DOT_PRODUCTS();
  Scratch s;
  const auto r = s.memtrain("train --dry-run --config " + checkpoint_config(s, "c.yaml", 2, 2, kBf16), prefer("fp32"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "memtrain: bf16 GEMMs: auto not measured in a dry run; assumed oneDNN bf16"));
  EXPECT_FALSE(contains(r.out, "bf16 GEMMs: auto chose"));
}

}  // namespace
}  // namespace memtrain::cli
