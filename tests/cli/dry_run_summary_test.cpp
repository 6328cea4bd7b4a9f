// A dry run computes nothing, so it has no speed: its run summary says "dry run" where a
// compute run prints tokens/s, and metrics.jsonl's tokens_per_s and mfu are null (issue 4).
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::Scratch;

const char* kYaml =
    "model:\n"
    "  vocab_size: 100\n"
    "  hidden_size: 32\n"
    "  num_hidden_layers: 1\n"
    "  num_attention_heads: 2\n"
    "  intermediate_size: 64\n"
    "  max_position_embeddings: 16\n"
    "data:\n"
    "  mock: true\n"
    "  seq_length: 16\n"
    "training:\n"
    "  micro_batch_size: 2\n"
    "  global_batch_size: 2\n"
    "  max_steps: 2\n"
    "  log_interval: 1\n"
    "  eval_interval: 1000\n"
    "  eval_steps: 1\n";

// The training lines of metrics.jsonl (those with "grad_norm").
std::vector<nlohmann::json> training_lines(const std::string& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("grad_norm")) lines.push_back(std::move(j));
  }
  return lines;
}

TEST(DryRunSummary, SaysDryRunInsteadOfTokensPerSecondAndWritesNullSpeeds) {
  Scratch s;
  s.write("exp.yaml", kYaml);
  const auto r = s.memtrain("train --config exp.yaml --dry-run --target 1GiB --run-dir run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 2 steps x 2 sequences x 16 tokens.
  EXPECT_TRUE(contains(r.out, "tokens/s         dry run (64 tokens)"));
  EXPECT_TRUE(contains(r.out, "step 2/2 | loss nan | dry run | ETA"));
  const auto lines = training_lines(s.path("run/metrics.jsonl"));
  ASSERT_EQ(lines.size(), 2u);
  for (const auto& j : lines) {
    EXPECT_TRUE(j["tokens_per_s"].is_null()) << j.dump();
    for (const char* key : {"mfu", "sgemm_fraction", "model_flops_per_s", "peak_flops", "sgemm_flops"}) {
      EXPECT_TRUE(j[key].is_null()) << key << " in " << j.dump();
    }
  }
}

TEST(DryRunSummary, ComputeRunStillPrintsANumberAndWritesSpeeds) {
  Scratch s;
  s.write("exp.yaml", kYaml);
  const auto r = s.memtrain("train --config exp.yaml --run-dir run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(contains(r.out, "dry run ("));
  EXPECT_TRUE(contains(r.out, "tokens/s         "));
  const auto lines = training_lines(s.path("run/metrics.jsonl"));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_GT(lines.back()["tokens_per_s"].get<double>(), 0.0);
}

}  // namespace
}  // namespace memtrain::cli
