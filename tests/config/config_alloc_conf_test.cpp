// MEMTRAIN_ALLOC_CONF (PYTORCH_CUDA_ALLOC_CONF syntax) over the memory section: the keys it names
// replace the file's, --set beats both, and bad text is a config error naming the variable.
#include <gtest/gtest.h>

#include <cstdlib>

#include "runtime/config/config_alloc_conf.hpp"
#include "tests/config/config_test_files.hpp"

namespace memtrain::train {
namespace {

using testing::ConfigFiles;
using testing::contains;
using testing::kMinimalYaml;
using testing::load_error;

class ScopedAllocConf {
 public:
  explicit ScopedAllocConf(const char* value) { ::setenv("MEMTRAIN_ALLOC_CONF", value, 1); }
  ~ScopedAllocConf() { ::unsetenv("MEMTRAIN_ALLOC_CONF"); }
};

std::string yaml_with_memory() { return std::string(kMinimalYaml) + "memory:\n  policy: pytorch\n  trace: true\n"; }

TEST(AllocConf, NamedKeysReplaceTheFileAndOthersStay) {
  ConfigFiles files;
  ScopedAllocConf env("max_split_size_mb:64, expandable_segments:True");
  const Config c = load_config(files.write("c.yaml", yaml_with_memory()), {});
  EXPECT_EQ(c.memory.max_split_size, 64u << 20);  // PyTorch's unit: MiB
  EXPECT_TRUE(c.memory.expandable_segments);
  EXPECT_EQ(c.memory.policy, "pytorch");  // from the file
  EXPECT_TRUE(c.memory.trace);
  EXPECT_EQ(c.origin.at("memory.max_split_size"), "MEMTRAIN_ALLOC_CONF=max_split_size_mb:64, expandable_segments:True");
}

TEST(AllocConf, PolicyFromTheEnvironment) {
  ConfigFiles files;
  ScopedAllocConf env("policy:vmm_stitch");
  EXPECT_EQ(load_config(files.write("c.yaml", yaml_with_memory()), {}).memory.policy, "vmm_stitch");
}

TEST(AllocConf, SetBeatsTheEnvironment) {
  ConfigFiles files;
  ScopedAllocConf env("max_split_size_mb:64");
  const Config c = load_config(files.write("c.yaml", yaml_with_memory()), {"memory.max_split_size=128MiB"});
  EXPECT_EQ(c.memory.max_split_size, 128u << 20);
}

TEST(AllocConf, UnknownOptionIsAConfigErrorNamingTheVariable) {
  ConfigFiles files;
  ScopedAllocConf env("max_split_size:64");
  const std::string msg = load_error(files.write("c.yaml", yaml_with_memory()));
  EXPECT_TRUE(contains(msg, "MEMTRAIN_ALLOC_CONF=max_split_size:64: "));
  EXPECT_TRUE(contains(msg, "max_split_size"));
}

// The variable's bytes are quoted escaped: raw 0xff and an escape sequence went to the terminal.
TEST(AllocConf, BinaryBytesAreShownEscaped) {
  ConfigFiles files;
  ScopedAllocConf env("policy:\xff\xfe\x1b[2J");
  const std::string msg = load_error(files.write("c.yaml", yaml_with_memory()));
  EXPECT_TRUE(contains(msg, "MEMTRAIN_ALLOC_CONF=policy:\\xff\\xfe\\x1b[2J: ")) << msg;
  EXPECT_EQ(msg.find('\x1b'), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\xff'), std::string::npos) << msg;
}

TEST(AllocConf, OptionThatDoesNothingInTheResultingConfigIsRejected) {
  // The variable is valid alone, but the file chose no_cache, under which it cannot act.
  ConfigFiles files;
  ScopedAllocConf env("expandable_segments:true");
  const std::string path = files.write("c.yaml", std::string(kMinimalYaml) + "memory:\n  policy: no_cache\n");
  const std::string msg = load_error(path);
  EXPECT_TRUE(contains(msg,
                       "MEMTRAIN_ALLOC_CONF=expandable_segments:true: memory.expandable_segments = true: has no "
                       "effect with memory.policy = no_cache (" +
                           path + ":"))
      << msg;
}

TEST(AllocConf, RuleAcrossSourcesNamesWhereEachKeyWasSet) {
  // The option comes from the variable and the policy from --set: the message names both.
  ConfigFiles files;
  ScopedAllocConf env("garbage_collection_threshold:0.5,capacity:1GiB");
  const std::string msg = load_error(files.write("c.yaml", kMinimalYaml), {"memory.policy=no_cache"});
  EXPECT_TRUE(contains(msg,
                       "MEMTRAIN_ALLOC_CONF=garbage_collection_threshold:0.5,capacity:1GiB: "
                       "memory.garbage_collection_threshold = 0.5: has no effect with memory.policy = no_cache "
                       "(--set memory.policy=no_cache)"))
      << msg;
}

TEST(AllocConf, ConfigMapsOntoAllocatorOptions) {
  MemoryConfig m;
  m.policy = "pytorch";
  m.max_split_size = 64u << 20;
  m.garbage_collection_threshold = 0.5;
  m.expandable_segments = true;
  m.capacity = 1u << 30;
  const memory::AllocatorOptions o = allocator_options(m);
  EXPECT_EQ(o.policy, "pytorch");
  EXPECT_EQ(o.max_split_size, 64u << 20);
  EXPECT_DOUBLE_EQ(o.garbage_collection_threshold, 0.5);
  EXPECT_TRUE(o.expandable_segments);
  EXPECT_EQ(o.capacity, 1u << 30);
  EXPECT_EQ(MemoryConfig{}.max_split_size, memory::kMaxSplitSizeUnset);
}

}  // namespace
}  // namespace memtrain::train
