// config_hash identifies an experiment: equal for configs that load to the same values however
// they are written, different when any value differs, stable across a round trip through
// canonical_yaml.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cctype>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "runtime/config/config_hash.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/config/config_schema.hpp"
#include "tests/config/config_test_files.hpp"

namespace memtrain::train {
namespace {

using testing::ConfigFiles;
using testing::kMinimalYaml;

TEST(ConfigHash, IgnoresKeyOrderCommentsSpellingAndExplicitDefaults) {
  ConfigFiles files;
  const Config a = load_config(files.write("a.yaml", kMinimalYaml), {});
  const Config b = load_config(files.write("b.yaml",
                                           "# same experiment, written differently\n"
                                           "data: {seq_length: 16, mock: True}\n"
                                           "model:\n  num_attention_heads: 4\n  hidden_size: 32\n  vocab_size: 64\n"
                                           "training:\n  lr: 0.0001   # the default, spelled out\n"),
                               {});
  EXPECT_EQ(config_hash(a), config_hash(b));
}

TEST(ConfigHash, IsSixteenHexDigits) {
  ConfigFiles files;
  const std::string h = config_hash(load_config(files.write("a.yaml", kMinimalYaml), {}));
  ASSERT_EQ(h.size(), 16u);
  for (char ch : h) EXPECT_TRUE(std::isxdigit(static_cast<unsigned char>(ch)) && !std::isupper(ch)) << h;
}

TEST(ConfigHash, IsXxh64OfTheCanonicalText) {
  ConfigFiles files;
  const Config c = load_config(files.write("a.yaml", kMinimalYaml), {});
  const std::string text = canonical_yaml(c);
  char expected[17];
  std::snprintf(expected, sizeof expected, "%016llx",
                static_cast<unsigned long long>(XXH64(text.data(), text.size(), 0)));
  EXPECT_EQ(config_hash(c), expected);
}

TEST(ConfigHash, ChangesWhenAnyKeyChanges) {
  // Every key in the table must reach the canonical text; perturb each one through --set.
  ConfigFiles files;
  const std::string path = files.write("a.yaml", "data:\n  mock: true\n");
  const std::string base = config_hash(load_config(path, {}));
  const std::vector<std::string> changes = {"model.vocab_size=1000",
                                            "model.hidden_size=384",
                                            "model.num_hidden_layers=2",
                                            "model.num_attention_heads=6",
                                            "model.intermediate_size=100",
                                            "model.max_position_embeddings=1024",
                                            "model.type_vocab_size=1",
                                            "model.layer_norm_eps=1e-5",
                                            "model.hidden_dropout_prob=0",
                                            "model.attention_probs_dropout_prob=0",
                                            "model.initializer_range=0.03",
                                            "data.corpus=other",
                                            "data.seq_length=64",
                                            "data.dynamic_seq_length=true",
                                            "data.mlm_probability=0.2",
                                            "data.tokenizer_type=unigram",
                                            "data.cache_dir=/tmp/c",
                                            "data.validation_fraction=0.1",
                                            "training.micro_batch_size=4",
                                            "training.global_batch_size=16",
                                            "training.max_steps=7",
                                            "training.lr=0.01",
                                            "training.min_lr=1e-6",
                                            "training.warmup_steps=3",
                                            "training.lr_schedule=cosine",
                                            "training.weight_decay=0",
                                            "training.adam_beta1=0.5",
                                            "training.adam_beta2=0.9",
                                            "training.adam_eps=1e-7",
                                            "training.grad_clip=2",
                                            "training.seed=1",
                                            "training.log_interval=1",
                                            "training.eval_interval=2",
                                            "training.eval_steps=3",
                                            "training.num_threads=1",
                                            "memory.policy=pytorch",
                                            "memory.trace=true",
                                            "memory.max_split_size=1GiB",
                                            "memory.capacity=1GiB",
                                            "memory.expandable_segments=true",
                                            "memory.limit=1GiB",
                                            "precision.dtype=bf16",
                                            "precision.fp32_grad_accumulation=true",
                                            "precision.loss_scale.initial_scale=1024",
                                            "precision.loss_scale.growth_factor=4",
                                            "precision.loss_scale.backoff_factor=0.25",
                                            "precision.loss_scale.growth_interval=100",
                                            "precision.loss_scale.hysteresis=2",
                                            "precision.loss_scale.min_loss_scale=0.5",
                                            "precision.loss_scale.max_skipped_steps_at_min=3",
                                            "memory.recompute=full",
                                            "memory.attention=flash"};
  for (const auto& change : changes) {
    // data.corpus is hashed but not checked when mock: true.
    EXPECT_NE(config_hash(load_config(path, {change})), base) << change;
  }
  // recompute_method acts (and loads) only with a recompute on.
  EXPECT_NE(config_hash(load_config(path, {"memory.recompute=full", "memory.recompute_method=block"})),
            config_hash(load_config(path, {"memory.recompute=full"})));
}

TEST(ConfigHash, CanonicalTextLoadsBackToTheSameConfig) {
  ConfigFiles files;
  const Config c = load_config(files.write("a.yaml", kMinimalYaml),
                               {"training.lr=3e-4", "model.layer_norm_eps=1e-12", "memory.max_split_size=100MiB",
                                "training.seed=18446744073709551615", "precision.dtype=fp16",
                                "precision.loss_scale.initial_scale=1024", "precision.loss_scale.hysteresis=3"});
  const Config back = load_config(files.write("canonical.yaml", canonical_yaml(c)), {});
  EXPECT_EQ(canonical_yaml(back), canonical_yaml(c));
  EXPECT_EQ(config_hash(back), config_hash(c));
  EXPECT_DOUBLE_EQ(back.training.lr, 3e-4);
  EXPECT_EQ(back.memory.max_split_size, 100u << 20);
  EXPECT_DOUBLE_EQ(back.precision.loss_scale.initial_scale, 1024.0);
  EXPECT_EQ(back.precision.loss_scale.hysteresis, 3);
}

// config.yaml of a run directory or a checkpoint holds every key, the other methods' included:
// it loads back with every compression method (eval and export-hf read it), while a key of
// another method set to a value of its own is still refused.
TEST(ConfigHash, CanonicalTextLoadsBackWithEveryCompressionMethod) {
  ConfigFiles files;
  for (const std::vector<std::string>& sets :
       {std::vector<std::string>{"compression.method=powersgd"},
        {"compression.method=onebit"},
        {"training.optimizer=onebit_adam", "compression.freeze_step=5", "compression.scale=rms"}}) {
    const Config c = load_config(files.write("a.yaml", kMinimalYaml), sets);
    const Config back = load_config(files.write("canonical.yaml", canonical_yaml(c)), {});
    EXPECT_EQ(canonical_yaml(back), canonical_yaml(c)) << sets[0];
  }
  EXPECT_THROW(
      load_config(files.write("b.yaml", kMinimalYaml), {"compression.method=powersgd", "compression.block_size=512"}),
      ConfigError);
  EXPECT_THROW(load_config(files.write("c.yaml", kMinimalYaml), {"compression.method=onebit", "compression.rank=8"}),
               ConfigError);
}

TEST(ConfigHash, CanonicalTextHasEveryKeyOfTheTable) {
  ConfigFiles files;
  const std::string text = canonical_yaml(load_config(files.write("a.yaml", kMinimalYaml), {}));
  for (const auto& key : config_keys()) {
    // Nested groups (precision.loss_scale.*) are nested mappings: the last name is the key.
    const std::string leaf = key.name.substr(key.name.rfind('.') + 1);
    EXPECT_NE(text.find(leaf + ":"), std::string::npos) << key.name;
  }
}

// docs/config.md is the reference users read: every key of the table must have its row.
TEST(ConfigReference, DocumentsEveryKey) {
  std::ifstream in(std::string(MEMTRAIN_SOURCE_DIR) + "/docs/config.md");
  ASSERT_TRUE(in) << "docs/config.md missing";
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& key : config_keys()) {
    const auto dot = key.name.find('.');
    const std::string section = dot == std::string::npos ? "Top level" : key.name.substr(0, dot);
    const std::string leaf = dot == std::string::npos ? key.name : key.name.substr(dot + 1);
    const auto heading = doc.find("## " + section + "\n");
    ASSERT_NE(heading, std::string::npos) << "no section " << section;
    const auto next = doc.find("\n## ", heading + 3);
    const std::string part = doc.substr(heading, next - heading);
    EXPECT_NE(part.find("| `" + leaf + "` |"), std::string::npos) << key.name << " has no row";
  }
}

}  // namespace
}  // namespace memtrain::train
