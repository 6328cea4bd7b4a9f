// Data parallelism end to end: `mpirun -np 2 memtrain train` must train exactly the run that one
// rank trains (Note [The global batch does not depend on how it is split]): same global batch,
// dropout keyed by the global sample index, gradients summed over ranks, one global masked-token
// count. Runs the built binary, as a user would.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/train/temp_dir.hpp"

namespace memtrain::train {
namespace {

namespace fs = std::filesystem;

std::vector<nlohmann::json> read_metrics(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// Dropout on (0.1), accumulation on both sides: 1 rank takes 4 micro-batches of 2, each of
// 2 ranks takes 2 micro-batches of 2.
constexpr const char* kConfig = R"(model:
  vocab_size: 64
  hidden_size: 32
  num_hidden_layers: 2
  num_attention_heads: 2
  intermediate_size: 64
  max_position_embeddings: 32
  hidden_dropout_prob: 0.1
  attention_probs_dropout_prob: 0.1
data:
  mock: true
  seq_length: 16
training:
  micro_batch_size: 2
  global_batch_size: 8
  max_steps: 20
  lr: 1.0e-2
  adam_eps: 1.0e-3
  warmup_steps: 2
  log_interval: 1
  eval_interval: 10
  eval_steps: 4
  num_threads: 1
)";

TEST(DataParallel, TwoRanksTrainTheSameRunAsOne) {
  const std::string memtrain = std::string(MEMTRAIN_BINARY_DIR) + "/memtrain";
  if (!fs::exists(memtrain)) GTEST_SKIP() << memtrain << " is not built";
  if (std::system("command -v mpirun > /dev/null") != 0) GTEST_SKIP() << "mpirun not found";
  testing::TempDir tmp;
  const std::string yaml = tmp.sub("dp.yaml");
  std::ofstream(yaml) << kConfig;
  const std::string log = " > " + tmp.sub("log.txt") + " 2>&1";
  ASSERT_EQ(std::system((memtrain + " train --config " + yaml + " --run-dir " + tmp.sub("one") + log).c_str()), 0);
  ASSERT_EQ(std::system(("mpirun --oversubscribe --allow-run-as-root -np 2 " + memtrain +
                         " train --config " + yaml + " --run-dir " + tmp.sub("two") + log).c_str()),
            0);
  const auto one = read_metrics(tmp.sub("one/metrics.jsonl"));
  const auto two = read_metrics(tmp.sub("two/metrics.jsonl"));
  ASSERT_EQ(one.size(), 23u);  // 20 training lines, evals at 0, 10, 20
  ASSERT_EQ(two.size(), one.size());
  // Only the order of float sums differs (micro-batches, then ranks): agreement to ~1e-6
  // relative after 20 updates; a wrong split (other samples, other dropout keys, a per-rank
  // mean) changes the loss at the first digit.
  for (std::size_t i = 0; i < one.size(); ++i) {
    const char* key = one[i].contains("loss") ? "loss" : "eval_loss";
    EXPECT_EQ(one[i]["step"], two[i]["step"]);
    const double a = one[i][key], b = two[i][key];
    EXPECT_NEAR(a, b, 1e-6 * std::abs(a)) << key << " at line " << i;
  }
}

}  // namespace
}  // namespace memtrain::train
