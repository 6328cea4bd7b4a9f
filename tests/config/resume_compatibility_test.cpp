// Which config changes a resume accepts (Note [What a resume may change]): the keys that never
// reach the parameters may change, with the same trajectory_hash; any other key is refused by
// name with both values; max_steps only with the schedule's length kept.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/config/config_hash.hpp"
#include "runtime/config/config_schema.hpp"
#include "runtime/config/resume_compatibility.hpp"
#include "runtime/core/errors.hpp"
#include "tests/config/config_test_files.hpp"

namespace memtrain::train {
namespace {

using testing::ConfigFiles;
using testing::kMinimalYaml;

TEST(ResumeCompatibility, KeysThatDoNotChangeTheTrajectoryMayChange) {
  ConfigFiles files;
  const std::string path = files.write("a.yaml", kMinimalYaml);
  const Config base = load_config(path, {"training.lr_decay_steps=10"});
  const std::string saved = canonical_yaml(base);
  const std::vector<std::string> changes = {"training.max_steps=20",
                                            "training.log_interval=7",
                                            "training.eval_interval=3",
                                            "training.eval_steps=2",
                                            "training.num_threads=1",
                                            "data.cache_dir=/tmp/elsewhere",
                                            "checkpoint.interval=5",
                                            "checkpoint.keep_last=4",
                                            "checkpoint.on_interrupt=true",
                                            "memory.trace=true",
                                            "memory.policy=pytorch",
                                            "memory.max_split_size=1GiB",
                                            "memory.expandable_segments=true",
                                            "memory.capacity=1GiB",
                                            "memory.limit=1GiB",
                                            "training.micro_batch_size=2",
                                            "memory.host_huge_pages=true"};
  for (const auto& change : changes) {
    const Config now = load_config(path, {"training.lr_decay_steps=10", change});
    EXPECT_NE(config_hash(now), config_hash(base)) << change;  // the change is real
    EXPECT_EQ(resume_conflicts(saved, 10, now), std::vector<std::string>{}) << change;
    EXPECT_EQ(trajectory_hash(now), trajectory_hash(base)) << change;
  }
}

TEST(ResumeCompatibility, EveryOtherKeyIsRefusedByNameWithBothValues) {
  ConfigFiles files;
  const std::string path = files.write("a.yaml", kMinimalYaml);
  const Config base = load_config(path, {});
  const std::string saved = canonical_yaml(base);
  const int decay = effective_lr_decay_steps(base.training);
  struct Case {
    std::string change, line;
  };
  const std::vector<Case> cases = {
      {"training.lr=0.002", "training.lr: checkpoint 0.0001, now 0.002"},
      {"training.seed=7", "training.seed: checkpoint 1234, now 7"},
      {"training.global_batch_size=64", "training.global_batch_size: checkpoint 8, now 64"},
      {"precision.dtype=fp16", "precision.dtype: checkpoint fp32, now fp16"},
      {"model.hidden_dropout_prob=0.5", "model.hidden_dropout_prob: checkpoint 0.1, now 0.5"},
      {"memory.attention=flash", "memory.attention: checkpoint standard, now flash"}};
  for (const auto& c : cases) {
    const Config now = load_config(path, {c.change});
    EXPECT_EQ(resume_conflicts(saved, decay, now), std::vector<std::string>{c.line}) << c.change;
    EXPECT_NE(trajectory_hash(now), trajectory_hash(base)) << c.change;
  }
  // Two keys at once: both named.
  EXPECT_EQ(resume_conflicts(saved, decay, load_config(path, {"training.lr=0.002", "training.seed=7"})).size(), 2u);
}

// Megatron-LM's --lr-decay-iters: a longer run keeps its schedule only when its length is fixed.
TEST(ResumeCompatibility, MaxStepsMayChangeOnlyWithTheScheduleLengthKept) {
  ConfigFiles files;
  const std::string path = files.write("a.yaml", kMinimalYaml);
  const Config base = load_config(path, {"training.max_steps=10"});  // lr_decay_steps 0: 10
  const std::string saved = canonical_yaml(base);
  const auto longer = resume_conflicts(saved, 10, load_config(path, {"training.max_steps=20"}));
  ASSERT_EQ(longer.size(), 1u);
  EXPECT_NE(longer[0].find("checkpoint 10, now 20; set training.lr_decay_steps: 10"), std::string::npos) << longer[0];
  EXPECT_EQ(resume_conflicts(saved, 10, load_config(path, {"training.max_steps=20", "training.lr_decay_steps=10"})),
            std::vector<std::string>{});
  EXPECT_EQ(trajectory_hash(load_config(path, {"training.max_steps=20", "training.lr_decay_steps=10"})),
            trajectory_hash(base));
  EXPECT_NE(trajectory_hash(load_config(path, {"training.max_steps=20"})), trajectory_hash(base));
}

TEST(ResumeCompatibility, ACheckpointConfigThatIsNotYamlIsAConfigError) {
  ConfigFiles files;
  const Config now = load_config(files.write("a.yaml", kMinimalYaml), {});
  EXPECT_THROW(resume_conflicts("model: [unclosed", 10, now), ConfigError);
  // A key the checkpoint's config lacks (written by another version) is a difference.
  const auto missing = resume_conflicts("model:\n  hidden_size: 32\n", effective_lr_decay_steps(now.training), now);
  EXPECT_FALSE(missing.empty());
  EXPECT_NE(missing[0].find("not in the checkpoint's config"), std::string::npos) << missing[0];
}

}  // namespace
}  // namespace memtrain::train
