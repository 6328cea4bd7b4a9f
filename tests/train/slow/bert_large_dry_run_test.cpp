// Compute-mode BERT-Large on this CPU and its dry run on a simulated A100 allocate the same
// memory, event for event (issue 4, "Dry run"): 24 layers, hidden 1024, 16 heads, intermediate
// 4096, vocabulary 30522, micro-batch 1, sequence 128, 2 steps on mock data. The reference is
// the compute run on the host's real memory (about 5.4 GB of fp32 model states).
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/config/device_target.hpp"
#include "runtime/train/trainer.hpp"
#include "tests/train/temp_dir.hpp"

namespace memtrain::train {
namespace {

Config bert_large() {
  Config c;
  c.name = "bert-large-dry-run-test";
  c.path = "tests/train/slow/bert_large_dry_run_test.cpp";
  c.model.vocab_size = 30522;
  c.model.hidden_size = 1024;
  c.model.num_hidden_layers = 24;
  c.model.num_attention_heads = 16;
  c.model.intermediate_size = 4096;
  c.model.max_position_embeddings = 512;
  c.data.mock = true;
  c.data.seq_length = 128;
  c.training.micro_batch_size = 1;
  c.training.global_batch_size = 1;
  c.training.max_steps = 2;
  c.training.log_interval = 1;
  c.training.eval_interval = 2;
  c.training.eval_steps = 1;
  c.memory.trace = true;
  return c;
}

std::vector<std::string> lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// peak_allocated_bytes of each training line of metrics.jsonl.
std::vector<long long> peaks(const std::string& path) {
  std::vector<long long> out;
  for (const auto& line : lines(path)) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("peak_allocated_bytes")) out.push_back(j["peak_allocated_bytes"].get<long long>());
  }
  return out;
}

TEST(BertLargeDryRun, SameTraceAndPeakAsTheComputeRun) {
  testing::TempDir tmp;
  const Config c = bert_large();
  ASSERT_EQ(run_training(c, RunOptions{tmp.sub("real"), std::nullopt}), 0);
  ASSERT_EQ(run_training(c, RunOptions{tmp.sub("dry"), parse_device_target("a100-40gb")}), 0);

  const auto real = lines(tmp.sub("real/memory_trace.csv"));
  const auto dry = lines(tmp.sub("dry/memory_trace.csv"));
  ASSERT_GT(real.size(), 1000u);
  ASSERT_EQ(real.size(), dry.size());
  for (std::size_t i = 0; i < real.size(); ++i) ASSERT_EQ(real[i], dry[i]) << "trace row " << i;

  const auto real_peaks = peaks(tmp.sub("real/metrics.jsonl"));
  ASSERT_EQ(real_peaks.size(), 2u);
  EXPECT_EQ(real_peaks, peaks(tmp.sub("dry/metrics.jsonl")));
  // More than the model states alone: 335M parameters x 16 bytes.
  EXPECT_GT(real_peaks.back(), 335'000'000LL * 16);
}

}  // namespace
}  // namespace memtrain::train
