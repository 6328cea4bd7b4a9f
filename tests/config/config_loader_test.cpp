// load_config on good input: the shipped configs, every key parsed into its field, defaults,
// and --set overrides. References: the values the issue and Hugging Face publish.
#include <gtest/gtest.h>

#include <cstdint>

#include "runtime/config/config_loader.hpp"
#include "runtime/config/config_validate.hpp"
#include "tests/config/config_test_files.hpp"

namespace memtrain::train {
namespace {

using testing::ConfigFiles;
using testing::kMinimalYaml;

std::string shipped(const std::string& name) { return std::string(MEMTRAIN_SOURCE_DIR) + "/configs/" + name; }

// A corpus is checked on load; shipped configs name "kjv", so force mock data when the
// `bible` program is absent (the corpus rule has its own tests).
std::vector<std::string> portable() { return {"data.mock=true"}; }

TEST(ShippedConfigs, BertLargeHasTheIssueDimensions) {
  const Config c = load_config(shipped("bert-large.yaml"), portable());
  EXPECT_EQ(c.model.hidden_size, 1024);
  EXPECT_EQ(c.model.num_hidden_layers, 24);
  EXPECT_EQ(c.model.num_attention_heads, 16);
  EXPECT_EQ(c.model.intermediate_size, 4096);
  EXPECT_EQ(c.model.vocab_size, 30522);
  EXPECT_EQ(c.model.max_position_embeddings, 512);
  EXPECT_EQ(c.precision.dtype, "fp32");
  EXPECT_EQ(c.name, "bert-large");
}

TEST(ShippedConfigs, BertBaseHasTheHuggingFaceDimensions) {
  // bert-base-uncased config.json: 768 hidden, 12 layers, 12 heads, 3072 FFN.
  const Config c = load_config(shipped("bert-base.yaml"), portable());
  EXPECT_EQ(c.model.hidden_size, 768);
  EXPECT_EQ(c.model.num_hidden_layers, 12);
  EXPECT_EQ(c.model.num_attention_heads, 12);
  EXPECT_EQ(c.model.intermediate_size, 3072);
  EXPECT_EQ(c.model.vocab_size, 30522);
}

TEST(ShippedConfigs, TinyIsSmallEnoughForTheTenMinuteJob) {
  const Config c = load_config(shipped("tiny.yaml"), portable());
  // Parameters of BERT (embeddings + layers + MLM head, decoder tied), counted by formula.
  const std::int64_t V = c.model.vocab_size, H = c.model.hidden_size, F = c.model.intermediate_size,
                     P = c.model.max_position_embeddings, L = c.model.num_hidden_layers;
  const std::int64_t per_layer = 4 * (H * H + H) + 2 * H * F + F + H + 4 * H;
  const std::int64_t params = V * H + P * H + 2 * H + 2 * H + L * per_layer + (H * H + H + 2 * H + V);
  EXPECT_GT(params, 1'000'000);
  EXPECT_LT(params, 10'000'000);
  EXPECT_EQ(c.data.corpus, "kjv");
  EXPECT_LE(c.data.seq_length, c.model.max_position_embeddings);
}

// bible-kjv is one of the packages scripts/install_deps.sh installs: its absence is a failure.
TEST(ShippedConfigs, AllLoadWithTheKjvCorpus) {
  ASSERT_FALSE(find_program("bible").empty()) << "bible-kjv not installed (scripts/install_deps.sh)";
  for (const char* name : {"main.yaml", "tiny.yaml", "bert-base.yaml", "bert-large.yaml", "bench-bert.yaml"}) {
    EXPECT_NO_THROW(load_config(shipped(name), {})) << name;
  }
}

TEST(LoadConfig, EmptyFileGivesHuggingFaceBertBaseDefaults) {
  ConfigFiles files;
  const Config c = load_config(files.write("empty.yaml", "data:\n  mock: true\n"), {});
  // Hugging Face BertConfig() defaults.
  EXPECT_EQ(c.model.vocab_size, 30522);
  EXPECT_EQ(c.model.hidden_size, 768);
  EXPECT_EQ(c.model.num_hidden_layers, 12);
  EXPECT_EQ(c.model.num_attention_heads, 12);
  EXPECT_EQ(c.model.intermediate_size, 3072);
  EXPECT_EQ(c.model.max_position_embeddings, 512);
  EXPECT_EQ(c.model.type_vocab_size, 2);
  EXPECT_FLOAT_EQ(c.model.layer_norm_eps, 1e-12f);
  EXPECT_FLOAT_EQ(c.model.hidden_dropout_prob, 0.1f);
  EXPECT_FLOAT_EQ(c.model.initializer_range, 0.02f);
  EXPECT_EQ(c.device, "cpu");
  EXPECT_EQ(c.memory.policy, "best_fit");
  EXPECT_EQ(c.memory.max_split_size, SIZE_MAX);  // the documented "unset" sentinel
}

TEST(LoadConfig, EveryKeyReachesItsField) {
  ConfigFiles files;
  const std::string path = files.write("all.yaml", R"(# every key, none at its default
device: cpu
model:
  vocab_size: 1000
  hidden_size: 96
  num_hidden_layers: 3
  num_attention_heads: 6
  intermediate_size: 384
  max_position_embeddings: 256
  type_vocab_size: 1
  layer_norm_eps: 1.0e-5
  hidden_dropout_prob: 0.2
  attention_probs_dropout_prob: 0.05
  initializer_range: 0.01
data:
  corpus: kjv
  mock: true
  seq_length: 64
  dynamic_seq_length: true
  mlm_probability: 0.2
  tokenizer_type: unigram
  cache_dir: /tmp/somewhere
  validation_fraction: 0.1
training:
  micro_batch_size: 4
  global_batch_size: 12
  max_steps: 77
  lr: 3e-4
  min_lr: 1e-5
  warmup_steps: 7
  lr_schedule: cosine
  weight_decay: 0.0
  adam_beta1: 0.8
  adam_beta2: 0.95
  adam_eps: 1e-6
  grad_clip: 0
  seed: 18446744073709551615
  log_interval: 3
  eval_interval: 11
  eval_steps: 1
  num_threads: 2
  optimizer: adamw
precision:
  dtype: fp32
memory:
  policy: pytorch
  trace: true
  max_split_size: 64MiB
  garbage_collection_threshold: 0.6
  expandable_segments: true
  host_huge_pages: true
  capacity: 2GiB
  limit: 1.5GiB
  reservation: 512MiB
parallel:
  tensor_model_parallel_size: 1
compression:
  method: none
checkpoint:
  interval: 0
  keep_last: 2
health:
)");
  const Config c = load_config(path, {});
  EXPECT_EQ(c.model.vocab_size, 1000);
  EXPECT_EQ(c.model.hidden_size, 96);
  EXPECT_EQ(c.model.num_hidden_layers, 3);
  EXPECT_EQ(c.model.num_attention_heads, 6);
  EXPECT_EQ(c.model.intermediate_size, 384);
  EXPECT_EQ(c.model.max_position_embeddings, 256);
  EXPECT_EQ(c.model.type_vocab_size, 1);
  EXPECT_FLOAT_EQ(c.model.layer_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.model.hidden_dropout_prob, 0.2f);
  EXPECT_FLOAT_EQ(c.model.attention_probs_dropout_prob, 0.05f);
  EXPECT_FLOAT_EQ(c.model.initializer_range, 0.01f);
  EXPECT_TRUE(c.data.mock);
  EXPECT_EQ(c.data.seq_length, 64);
  EXPECT_TRUE(c.data.dynamic_seq_length);
  EXPECT_FLOAT_EQ(c.data.mlm_probability, 0.2f);
  EXPECT_EQ(c.data.tokenizer_type, "unigram");
  EXPECT_EQ(c.data.cache_dir, "/tmp/somewhere");
  EXPECT_DOUBLE_EQ(c.data.validation_fraction, 0.1);
  EXPECT_EQ(c.training.micro_batch_size, 4);
  EXPECT_EQ(c.training.global_batch_size, 12);
  EXPECT_EQ(c.training.max_steps, 77);
  EXPECT_DOUBLE_EQ(c.training.lr, 3e-4);
  EXPECT_DOUBLE_EQ(c.training.min_lr, 1e-5);
  EXPECT_EQ(c.training.warmup_steps, 7);
  EXPECT_EQ(c.training.lr_schedule, "cosine");
  EXPECT_DOUBLE_EQ(c.training.weight_decay, 0.0);
  EXPECT_DOUBLE_EQ(c.training.adam_beta1, 0.8);
  EXPECT_DOUBLE_EQ(c.training.adam_beta2, 0.95);
  EXPECT_DOUBLE_EQ(c.training.adam_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.training.grad_clip, 0.0);
  EXPECT_EQ(c.training.seed, UINT64_MAX);
  EXPECT_EQ(c.training.log_interval, 3);
  EXPECT_EQ(c.training.eval_interval, 11);
  EXPECT_EQ(c.training.eval_steps, 1);
  EXPECT_EQ(c.training.num_threads, 2);
  EXPECT_EQ(c.memory.policy, "pytorch");
  EXPECT_TRUE(c.memory.trace);
  EXPECT_EQ(c.memory.max_split_size, 64u << 20);
  EXPECT_DOUBLE_EQ(c.memory.garbage_collection_threshold, 0.6);
  EXPECT_TRUE(c.memory.expandable_segments);
  EXPECT_TRUE(c.memory.host_huge_pages);
  EXPECT_EQ(c.memory.capacity, 2ull << 30);
  EXPECT_EQ(c.memory.limit, 3ull << 29);
  EXPECT_EQ(c.memory.reservation, 512ull << 20);
  EXPECT_EQ(c.checkpoint.interval, 0);
  EXPECT_EQ(c.checkpoint.keep_last, 2);
  EXPECT_EQ(c.origin.at("model.hidden_size"), path + ":5");
}

TEST(LoadConfig, CreatesNothingOnDisk) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", kMinimalYaml);
  const auto before = std::distance(std::filesystem::directory_iterator(files.dir()), {});
  load_config(path, {});
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(files.dir()), {}), before);
}

TEST(SetOverride, ReplacesTheFileValueAndRecordsTheArgument) {
  ConfigFiles files;
  const Config c = load_config(files.write("c.yaml", kMinimalYaml),
                               {"model.hidden_size=64", "training.lr=0.5", "memory.max_split_size=1GiB"});
  EXPECT_EQ(c.model.hidden_size, 64);
  EXPECT_DOUBLE_EQ(c.training.lr, 0.5);
  EXPECT_EQ(c.memory.max_split_size, 1ull << 30);
  EXPECT_EQ(c.origin.at("model.hidden_size"), "--set model.hidden_size=64");
}

TEST(SetOverride, LaterArgumentWins) {
  ConfigFiles files;
  const Config c = load_config(files.write("c.yaml", kMinimalYaml), {"training.max_steps=5", "training.max_steps=9"});
  EXPECT_EQ(c.training.max_steps, 9);
}

TEST(SetOverride, TopLevelDeviceAndQuotedValues) {
  ConfigFiles files;
  const Config c = load_config(files.write("c.yaml", kMinimalYaml), {"device=cpu", "data.cache_dir='/tmp/x y'"});
  EXPECT_EQ(c.device, "cpu");
  EXPECT_EQ(c.data.cache_dir, "/tmp/x y");
  // As in the file: an unquoted '#' after a space starts a comment; inside a word or quotes it
  // is text.
  const Config d = load_config(files.write("c.yaml", kMinimalYaml),
                               {"training.lr=1e-3 # c", "data.cache_dir=/tmp/a#b", "data.corpus='x # y'"});
  EXPECT_DOUBLE_EQ(d.training.lr, 1e-3);
  EXPECT_EQ(d.data.cache_dir, "/tmp/a#b");
  EXPECT_EQ(d.data.corpus, "x # y");
}

// A CUDA device loads as a name; whether it exists is checked by `memtrain train` (issue 14).
TEST(SetOverride, CudaDevicesLoadWithTheirIndex) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", kMinimalYaml);
  EXPECT_EQ(load_config(path, {"device=cuda"}).device, "cuda");
  EXPECT_EQ(load_config(path, {"device=cuda:3"}).device, "cuda:3");
  EXPECT_EQ(load_config(path, {"device=cuda:007"}).device, "cuda:7");
}

TEST(SetOverride, CanRepairWhatTheFileGotWrongBeforeValidation) {
  // Cross-key rules run after every override, so a --set can fix a pair the file broke.
  ConfigFiles files;
  const std::string path = files.write("c.yaml", std::string(kMinimalYaml) + "training:\n  global_batch_size: 6\n");
  EXPECT_NO_THROW(load_config(path, {"training.micro_batch_size=3"}));
}

TEST(CheckDataParallelSize, AcceptsMultiplesOfMicroTimesRanks) {
  ConfigFiles files;
  const Config c = load_config(
      files.write("c.yaml", std::string(kMinimalYaml) + "training:\n  micro_batch_size: 4\n  global_batch_size: 16\n"),
      {});
  EXPECT_NO_THROW(check_data_parallel_size(c, 1));
  EXPECT_NO_THROW(check_data_parallel_size(c, 2));
  EXPECT_NO_THROW(check_data_parallel_size(c, 4));
}

}  // namespace
}  // namespace memtrain::train
