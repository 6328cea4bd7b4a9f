#include "runtime/train/trainer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "kernels/cpu/threads.hpp"
#include "memory/out_of_memory.hpp"
#include "memory/replay.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/train/hardware_peak.hpp"
#include "runtime/train/stop_signal.hpp"
#include "tests/memory/ledger_test_util.hpp"
#include "tests/train/metrics_keys.hpp"
#include "tests/train/temp_dir.hpp"
#include "tests/train/tiny_config.hpp"

namespace memtrain::train {
namespace {

namespace fs = std::filesystem;

std::vector<nlohmann::json> read_metrics(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

using testing::slurp;

using testing::kEvalKeys;
using testing::kTrainKeys;

// About two seconds on 2 cores: 2 layers, hidden 32, 120 steps of 16 x 16 tokens.
// Why the loss must fall by 0.2: mock labels are uniform over the V - 5 ordinary ids, never the
// 5 special ids, so a model that has learned only that reaches ln(V - 5) from about ln(V) at
// initialisation: ln(16) - ln(11) = 0.37 nats with V = 16 (copying the 10% kept tokens would
// take it lower still). The evaluation set (8 batches, ~150 masked tokens) keeps the noise of
// the mean well below that margin.
TEST(RunTraining, MockRunLossFallsAndEveryOutputIsWritten) {
  testing::TempDir tmp;
  Config c = testing::tiny_mock_config();
  c.model.vocab_size = 16;
  ASSERT_EQ(run_training(c, RunOptions{tmp.sub("run")}), 0);

  const auto lines = read_metrics(tmp.sub("run/metrics.jsonl"));
  std::vector<nlohmann::json> train, eval;
  for (const auto& l : lines) (l.contains("eval_loss") ? eval : train).push_back(l);
  ASSERT_EQ(train.size(), 6u);  // every 20 of 120 steps
  ASSERT_EQ(eval.size(), 3u);   // steps 0, 60, 120
  for (const auto& l : train) {
    for (const auto& k : kTrainKeys) EXPECT_TRUE(l.contains(k)) << k << " in " << l.dump();
  }
  for (const auto& l : eval) {
    for (const auto& k : kEvalKeys) EXPECT_TRUE(l.contains(k)) << k << " in " << l.dump();
  }
  EXPECT_EQ(train.back()["step"], 120);
  EXPECT_EQ(eval.front()["step"], 0);
  EXPECT_EQ(eval.back()["step"], 120);
  const double start = eval.front()["eval_loss"], end = eval.back()["eval_loss"];
  EXPECT_NEAR(start, std::log(16.0), 0.1);  // near-uniform predictions at initialisation
  EXPECT_LT(end, start - 0.2) << "eval loss " << start << " -> " << end;
  EXPECT_NEAR(eval.back()["eval_perplexity"].get<double>(), std::exp(end), 1e-6 * std::exp(end));
  // Speeds depend on the machine and its load, so they are checked for their meaning, never
  // against a bound: present, finite, positive, and each ratio computed from its own figures.
  const HardwarePeak hw = hardware_peak(kernels::num_threads());
  for (const auto& l : train) {
    const double tokens_per_s = l["tokens_per_s"], model = l["model_flops_per_s"];
    EXPECT_TRUE(std::isfinite(tokens_per_s) && tokens_per_s > 0) << l.dump();
    EXPECT_TRUE(std::isfinite(model) && model > 0) << l.dump();  // its count: TrainStep's test
    const double sgemm = l["sgemm_flops"];
    EXPECT_TRUE(std::isfinite(sgemm) && sgemm > 0) << l.dump();
    EXPECT_NEAR(l["sgemm_fraction"].get<double>(), model / sgemm, 1e-12 * model / sgemm);
    if (hw.flops() > 0) {
      EXPECT_DOUBLE_EQ(l["peak_flops"].get<double>(), hw.flops());
      EXPECT_NEAR(l["mfu"].get<double>(), model / hw.flops(), 1e-12 * model / hw.flops());
    } else {
      EXPECT_TRUE(l["mfu"].is_null()) << l.dump();  // unknown peak: no made-up ratio
    }
  }
  EXPECT_GT(train.back()["peak_allocated_bytes"].get<double>(), 0.0);
  EXPECT_TRUE(fs::exists(tmp.sub("run/memory_snapshot.json")));
  EXPECT_TRUE(fs::exists(tmp.sub("run/config.yaml")));
  EXPECT_FALSE(nlohmann::json::parse(slurp(tmp.sub("run/run.json")))["trajectory_hash"].get<std::string>().empty());
}

// memory.trace: the snapshot carries the allocation history and the Chrome trace is written.
TEST(RunTraining, MemoryTraceWritesSnapshotHistoryAndChromeTrace) {
  testing::TempDir tmp;
  Config c = testing::tiny_mock_config();
  c.training.max_steps = 2;
  c.memory.trace = true;
  ASSERT_EQ(run_training(c, RunOptions{tmp.sub("run")}), 0);
  const auto snapshot = nlohmann::json::parse(slurp(tmp.sub("run/memory_snapshot.json")));
  ASSERT_TRUE(snapshot.contains("segments"));
  EXPECT_FALSE(snapshot["segments"].empty());  // parameters, gradients, moments stay allocated
  ASSERT_TRUE(snapshot.contains("device_traces"));
  EXPECT_FALSE(snapshot["device_traces"][0].empty());
  const auto trace = nlohmann::json::parse(slurp(tmp.sub("run/memory_trace.json")));
  EXPECT_FALSE(trace["traceEvents"].empty());
}

// memory.trace also writes the run's requests as a replay CSV. Replaying them under the run's
// own policy must reproduce the run: the same requests in the same order through the same
// best_fit rules give the same blocks, so the replay's peak allocated bytes equal the peak the
// run's allocator reported (metrics.jsonl, from CachingAllocator::stats()). The capacity is far
// above the run's needs so that no segment is refused in either. The reference peak is taken
// from the last training line; what runs after it (the final evaluation: one micro-batch
// forward, no activations kept for a backward) holds less than a training step does.
TEST(RunTraining, MemoryTraceCsvReplaysToTheRunsPeakAllocatedBytes) {
  testing::TempDir tmp;
  Config c = testing::tiny_mock_config();
  c.training.max_steps = 2;
  c.training.log_interval = 1;
  c.memory.policy = "best_fit";
  c.memory.trace = true;
  ASSERT_EQ(run_training(c, RunOptions{tmp.sub("run")}), 0);

  double run_peak = 0.0;
  for (const auto& l : read_metrics(tmp.sub("run/metrics.jsonl"))) {
    if (l.contains("peak_allocated_bytes")) run_peak = l["peak_allocated_bytes"].get<double>();
  }
  ASSERT_GT(run_peak, 0.0);

  const std::string csv = tmp.sub("run/memory_trace.csv");
  ASSERT_TRUE(fs::exists(csv));
  std::ifstream in(csv);
  std::string header;
  std::getline(in, header);
  EXPECT_EQ(header, "op,id,bytes,stream,tag");

  const auto report = memory::replay_trace_file(csv, "best_fit", std::size_t{1} << 40);
  EXPECT_GT(report.num_allocs, 0u);
  EXPECT_EQ(report.num_ooms, 0u);
  EXPECT_EQ(static_cast<double>(report.peak_allocated_bytes), run_peak);
  // Requested bytes are a lower bound of allocated (block sizes are rounded up).
  EXPECT_LE(report.peak_live_bytes, report.peak_allocated_bytes);
}

// memory.limit: a run within its limit trains (its memory comes through the host's shared
// ledger); the same run with a limit below its first segment stops with OutOfMemory naming
// memory.limit. The tiny model holds well under 64 MiB (parameters, gradients, Adam moments
// and activations of 16 x 16 tokens at hidden 32), so 64 MiB cannot be what fails.
TEST(RunTraining, MemoryLimitIsEnforcedThroughTheSharedLedger) {
  testing::TempDir tmp;
  const memory::testing::ScopedDevice ledger;  // this test's own ledger, removed at the end
  Config c = testing::tiny_mock_config();
  c.memory.ledger = ledger.name;
  c.training.max_steps = 2;
  c.memory.limit = std::size_t{64} << 20;
  ASSERT_EQ(run_training(c, RunOptions{tmp.sub("ok")}), 0);
  double peak_reserved = 0.0;
  for (const auto& l : read_metrics(tmp.sub("ok/metrics.jsonl"))) {
    if (l.contains("reserved_bytes")) peak_reserved = std::max(peak_reserved, l["reserved_bytes"].get<double>());
  }
  EXPECT_GT(peak_reserved, 0.0);
  EXPECT_LE(peak_reserved, static_cast<double>(c.memory.limit));

  c.memory.limit = std::size_t{1} << 20;  // below the allocator's first 2 MiB segment
  try {
    run_training(c, RunOptions{tmp.sub("small")});
    ADD_FAILURE() << "a 1 MiB limit did not stop the run";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("memory.limit is 1048576 bytes"), std::string::npos) << e.what();
  }
}

// An OutOfMemory after the run directory exists still leaves memory_snapshot.json there (the
// allocator at the failure, see Note [Memory record of an out-of-memory run]) and propagates.
// 4 MiB holds the tiny model and its Adam state (well under 1 MiB) but not the activations
// of 64 x 32 tokens (attention probabilities alone are 64 x 2 x 32 x 32 floats = 512 KiB per
// layer, plus [64, 32, 64] intermediates and their gradients).
TEST(RunTraining, OutOfMemoryDuringTrainingStillWritesTheMemorySnapshot) {
  testing::TempDir tmp;
  Config c = testing::tiny_mock_config();
  c.data.seq_length = 32;
  c.training.micro_batch_size = 64;
  c.training.global_batch_size = 64;
  c.training.max_steps = 2;
  const memory::testing::ScopedDevice ledger;  // this test's own ledger, removed at the end
  c.memory.ledger = ledger.name;
  c.memory.limit = std::size_t{4} << 20;
  EXPECT_THROW(run_training(c, RunOptions{tmp.sub("run")}), OutOfMemory);
  ASSERT_TRUE(fs::exists(tmp.sub("run/config.yaml"))) << "the OOM came before the run directory";
  const auto snapshot = nlohmann::json::parse(slurp(tmp.sub("run/memory_snapshot.json")));
  EXPECT_TRUE(snapshot.contains("segments")) << snapshot.dump().substr(0, 200);
  EXPECT_FALSE(fs::exists(tmp.sub("run/memory_snapshot.json.tmp")));
}

TEST(RunTraining, RunDirectoryOfAnotherConfigIsRefusedUntouched) {
  testing::TempDir tmp;
  Config c = testing::tiny_mock_config();
  c.training.max_steps = 2;
  ASSERT_EQ(run_training(c, RunOptions{tmp.sub("run")}), 0);
  const std::string metrics = slurp(tmp.sub("run/metrics.jsonl"));
  const std::string run_json = slurp(tmp.sub("run/run.json"));
  c.training.lr *= 2;
  EXPECT_THROW(run_training(c, RunOptions{tmp.sub("run")}), ConfigError);
  EXPECT_EQ(slurp(tmp.sub("run/metrics.jsonl")), metrics);
  EXPECT_EQ(slurp(tmp.sub("run/run.json")), run_json);
}

TEST(RunTraining, GlobalBatchNotSplittableIsRefusedBeforeTheRunDirectoryExists) {
  testing::TempDir tmp;
  Config c = testing::tiny_mock_config();
  c.training.global_batch_size = 12;  // not a multiple of micro_batch_size 8
  EXPECT_THROW(run_training(c, RunOptions{tmp.sub("run")}), ConfigError);
  EXPECT_FALSE(fs::exists(tmp.sub("run")));
}

// SIGINT (raised from another thread once the first training line is written) stops the run
// after the step in progress: exit code 130, metrics and the memory snapshot still written.
TEST(RunTraining, SigintStopsCleanlyAfterTheCurrentStep) {
  testing::TempDir tmp;
  Config c = testing::tiny_mock_config();
  c.training.max_steps = 100000;  // minutes if the signal were ignored
  c.training.log_interval = 1;
  c.training.eval_interval = 100000;
  const std::string metrics = tmp.sub("run/metrics.jsonl");
  std::atomic<bool> done{false};
  std::thread interrupter([&] {
    while (!done) {
      // eval line at step 0, then the first training line
      if (fs::exists(metrics) && read_metrics(metrics).size() >= 2) {
        std::raise(SIGINT);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  const int rc = run_training(c, RunOptions{tmp.sub("run")});
  done = true;
  interrupter.join();
  EXPECT_EQ(rc, kInterruptedExitCode);
  const auto lines = read_metrics(metrics);
  ASSERT_GE(lines.size(), 3u);
  EXPECT_TRUE(lines.back().contains("eval_loss"));  // a final evaluation after stopping
  const auto& last_train = lines[lines.size() - 2];
  EXPECT_LT(last_train["step"].get<int>(), 1000);
  EXPECT_EQ(lines.back()["step"], last_train["step"]);
  EXPECT_TRUE(fs::exists(tmp.sub("run/memory_snapshot.json")));
}

}  // namespace
}  // namespace memtrain::train
