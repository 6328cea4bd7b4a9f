// The compressor and optimizer registries (Note [Components own their settings]): what they
// declare agrees with the key table, and the choices and messages come from them.
#include "runtime/config/component_registry.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "runtime/config/config_schema.hpp"
#include "runtime/core/errors.hpp"
#include "tests/config/config_test_files.hpp"

namespace memtrain::train {
namespace {

using testing::ConfigFiles;
using testing::kMinimalYaml;

std::vector<const ComponentSettings*> every_component() {
  std::vector<const ComponentSettings*> all;
  for (const auto& e : compressor_registry()) all.push_back(&e.settings);
  for (const auto& o : optimizer_registry()) all.push_back(&o);
  return all;
}

// A key a component owns or reads is a key of the table; no key has two owners, so the
// refusal of an unselected component's key names one owner.
TEST(ComponentRegistry, EveryDeclaredKeyIsInTheTableAndHasOneOwner) {
  std::set<std::string> owned;
  for (const ComponentSettings* s : every_component()) {
    EXPECT_FALSE(s->name.empty());
    EXPECT_FALSE(s->title.empty()) << s->name;
    for (const auto& key : s->keys) {
      EXPECT_NE(find_key(key), nullptr) << s->name << " owns " << key;
      EXPECT_TRUE(owned.insert(key).second) << key << " has two owners";
    }
    for (const auto& key : s->reads) EXPECT_NE(find_key(key), nullptr) << s->name << " reads " << key;
  }
}

// The selecting keys accept exactly the registered names (and none for compression).
TEST(ComponentRegistry, SelectingKeysListTheRegisteredNames) {
  ConfigFiles files;
  for (const auto& name : compressor_names()) {
    EXPECT_EQ(load_config(files.write("c.yaml", kMinimalYaml), {"compression.method=" + name}).compression.method,
              name);
    ASSERT_NE(find_compressor(name), nullptr);
    EXPECT_TRUE(find_compressor(name)->make) << name;
  }
  for (const auto& name : optimizer_names()) {
    ASSERT_NE(find_optimizer(name), nullptr);
  }
  EXPECT_EQ(find_key("compression.method")->expected, "one of none, powersgd, onebit");
  EXPECT_EQ(find_key("training.optimizer")->expected, "one of adamw, onebit_adam");
  EXPECT_EQ(find_compressor("none"), nullptr);
  EXPECT_EQ(find_optimizer("sgd"), nullptr);
}

// Per-rank state follows the selected components, not their names.
TEST(ComponentRegistry, PerRankStateComesFromTheSelectedComponents) {
  Config c;
  EXPECT_FALSE(keeps_per_rank_state(c));
  c.compression.method = "powersgd";
  EXPECT_TRUE(keeps_per_rank_state(c));
  c.compression.method = "none";
  c.training.optimizer = "onebit_adam";
  EXPECT_TRUE(keeps_per_rank_state(c));
}

}  // namespace
}  // namespace memtrain::train
