// Recompute settings that would do nothing are refused (Note [Recompute options that do
// nothing], docs/config.md "Combinations that would do nothing"): one ConfigError naming the
// key, its file:line and the other key of the rule. Line numbers are those of the YAML text
// each test writes (kMinimalYaml is 7 lines; the memory section starts at line 8).
#include <gtest/gtest.h>

#include "runtime/core/errors.hpp"
#include "runtime/config/config_loader.hpp"
#include "tests/config/config_test_files.hpp"

namespace memtrain::train {
namespace {

using testing::ConfigFiles;
using testing::contains;
using testing::kMinimalYaml;
using testing::load_error;

std::string with_memory(const std::string& keys) { return std::string(kMinimalYaml) + "memory:\n" + keys; }

TEST(RecomputeCombinations, SelectiveWithFlashAttentionIsRefusedNamingBothKeys) {
  ConfigFiles files;
  const auto path = files.write("c.yaml", with_memory("  recompute: selective\n  attention: flash\n"));
  const std::string e = load_error(path);
  EXPECT_TRUE(contains(e, "c.yaml:9: memory.recompute = selective: has no effect with memory.attention = flash"));
  EXPECT_TRUE(contains(e, "c.yaml:10"));
  EXPECT_TRUE(contains(e, "expected none or full with memory.attention = flash"));
}

// The key given last on the command line is the one blamed.
TEST(RecomputeCombinations, FlashSetOverSelectiveBlamesTheAttentionOverride) {
  ConfigFiles files;
  const auto path = files.write("c.yaml", with_memory("  attention: flash\n"));
  const std::string e = load_error(path, {"memory.recompute=selective"});
  EXPECT_TRUE(contains(e, "--set memory.recompute=selective: memory.recompute = selective"));
}

TEST(RecomputeCombinations, AutoWithALayerCountIsRefused) {
  ConfigFiles files;
  const auto path =
      files.write("c.yaml", with_memory("  recompute: auto\n  budget: 1GiB\n  recompute_num_layers: 2\n"));
  const std::string e = load_error(path);
  EXPECT_TRUE(contains(e, "c.yaml:11: memory.recompute_num_layers = 2: has no effect with memory.recompute = auto"));
  EXPECT_TRUE(contains(e, "auto chooses the layers itself"));
}

TEST(RecomputeCombinations, BlockMethodWithoutRecomputeIsRefused) {
  ConfigFiles files;
  const auto path = files.write("c.yaml", with_memory("  recompute_method: block\n"));
  const std::string e = load_error(path);
  EXPECT_TRUE(contains(e, "c.yaml:9: memory.recompute_method = block: has no effect with memory.recompute = none"));
  EXPECT_TRUE(contains(e, "expected uniform (the default), or memory.recompute selective or full"));
}

// The meaningful neighbours of the refused settings still load.
TEST(RecomputeCombinations, MeaningfulNeighboursLoad) {
  ConfigFiles files;
  EXPECT_NO_THROW(load_config(files.write("a.yaml", with_memory("  recompute: full\n  attention: flash\n")), {}));
  EXPECT_NO_THROW(load_config(files.write("b.yaml", with_memory("  recompute: selective\n")), {}));
  EXPECT_NO_THROW(load_config(
      files.write("c.yaml", with_memory("  recompute: full\n  recompute_method: block\n  recompute_num_layers: 2\n")),
      {}));
  EXPECT_NO_THROW(load_config(files.write("d.yaml", with_memory("  recompute: auto\n  budget: 1GiB\n")), {}));
}

}  // namespace
}  // namespace memtrain::train
