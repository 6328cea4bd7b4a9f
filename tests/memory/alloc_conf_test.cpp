// MEMTRAIN_ALLOC_CONF parsing (PYTORCH_CUDA_ALLOC_CONF syntax) and the
// rejection of option combinations that would do nothing. Expected values come
// from the documented syntax.
#include <gtest/gtest.h>

#include <cctype>
#include <memory>
#include <ostream>
#include <string>

#include "memory/allocator_options.hpp"
#include "memory/caching_allocator.hpp"
#include "memory/host_resource.hpp"
#include "memory/simulated_resource.hpp"

namespace memtrain::memory {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

// Case 6 (second half): max_split_size reads a documented sentinel when unset.
TEST(AllocConf, UnsetMaxSplitSizeIsTheDocumentedSentinel) {
  EXPECT_EQ(AllocatorOptions{}.max_split_size, kMaxSplitSizeUnset);
  EXPECT_EQ(kMaxSplitSizeUnset, SIZE_MAX);
  EXPECT_EQ(parse_alloc_conf("").max_split_size, kMaxSplitSizeUnset);
  EXPECT_EQ(parse_alloc_conf("policy:pytorch").max_split_size, kMaxSplitSizeUnset);
}

TEST(AllocConf, EmptyStringGivesDefaults) {
  const AllocatorOptions o = parse_alloc_conf("  ");
  EXPECT_EQ(o.policy, "best_fit");
  EXPECT_EQ(o.garbage_collection_threshold, 0.0);
  EXPECT_FALSE(o.expandable_segments);
  EXPECT_EQ(o.capacity, 0u);
}

TEST(AllocConf, ParsesEveryKey) {
  const AllocatorOptions o = parse_alloc_conf(
      "policy:vmm_stitch, max_split_size_mb:128 "
      ",garbage_collection_threshold:0.6,"
      "expandable_segments:True,capacity:40GiB");
  EXPECT_EQ(o.policy, "vmm_stitch");
  EXPECT_EQ(o.max_split_size, 128 * MiB);
  EXPECT_DOUBLE_EQ(o.garbage_collection_threshold, 0.6);
  EXPECT_TRUE(o.expandable_segments);
  EXPECT_EQ(o.capacity, std::size_t{40} << 30);
}

// capacity:0 means what memory.capacity: 0 means in a config: the device's capacity.
TEST(AllocConf, CapacityZeroIsTheDevicesCapacity) {
  EXPECT_EQ(parse_alloc_conf("capacity:0").capacity, 0u);
  EXPECT_EQ(parse_alloc_conf("capacity:0").capacity, AllocatorOptions{}.capacity);
}

TEST(AllocConf, RoundTripsThroughText) {
  AllocatorOptions o;
  o.policy = "pytorch";
  o.max_split_size = 256 * MiB;
  o.garbage_collection_threshold = 0.75;
  o.expandable_segments = true;
  o.capacity = 3u << 30;
  const AllocatorOptions back = parse_alloc_conf(to_alloc_conf(o));
  EXPECT_EQ(back.policy, o.policy);
  EXPECT_EQ(back.max_split_size, o.max_split_size);
  EXPECT_DOUBLE_EQ(back.garbage_collection_threshold, o.garbage_collection_threshold);
  EXPECT_EQ(back.expandable_segments, o.expandable_segments);
  EXPECT_EQ(back.capacity, o.capacity);
}

// Each bad input is rejected with a message naming what was wrong.
struct BadConf {
  const char* text;
  const char* must_mention;
};

void PrintTo(const BadConf& c, std::ostream* os) { *os << "'" << c.text << "'"; }

// The input itself, as a test name: "policy:pytorch,,capacity:1GiB" ->
// policy_pytorch__capacity_1GiB.
std::string bad_conf_name(const ::testing::TestParamInfo<BadConf>& info) {
  std::string name = info.param.text;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

class AllocConfRejects : public ::testing::TestWithParam<BadConf> {};

TEST_P(AllocConfRejects, WithAMessageNamingTheProblem) {
  try {
    parse_alloc_conf(GetParam().text);
    FAIL() << "accepted '" << GetParam().text << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(GetParam().must_mention), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Inputs, AllocConfRejects,
                         ::testing::Values(BadConf{"colour:blue", "unknown key 'colour'"},
                                           BadConf{"policy:fastest", "one of no_cache, pytorch, best_fit, vmm_stitch"},
                                           BadConf{"policy", "has no ':'"},
                                           BadConf{"policy:pytorch,policy:best_fit", "'policy' is given twice"},
                                           BadConf{"policy:pytorch,,capacity:1GiB", "empty entry"},
                                           BadConf{"max_split_size_mb:20", "greater than 20"},
                                           BadConf{"max_split_size_mb:-5", "max_split_size_mb = '-5'"},
                                           BadConf{"max_split_size_mb:12abc", "max_split_size_mb = '12abc'"},
                                           BadConf{"garbage_collection_threshold:1.0", "strictly between 0.0 and 1.0"},
                                           BadConf{"garbage_collection_threshold:0", "strictly between 0.0 and 1.0"},
                                           BadConf{"garbage_collection_threshold:half", "garbage_collection_threshold"},
                                           BadConf{"expandable_segments:yes", "True or False"},
                                           BadConf{"capacity:lots", "capacity = 'lots'"},
                                           BadConf{"policy:no_cache,max_split_size_mb:64", "never splits"},
                                           BadConf{"policy:no_cache,garbage_collection_threshold:0.5",
                                                   "caches nothing"},
                                           BadConf{"policy:no_cache,expandable_segments:True", "expandable_segments"}),
                         bad_conf_name);

// A collection threshold with nothing to measure it against is inert: rejected
// once the device is known to be unbounded, accepted with a capacity.
TEST(AllocConf, ThresholdWithoutCapacityIsRejectedOnUnboundedUpstream) {
  const AllocatorOptions o = parse_alloc_conf("garbage_collection_threshold:0.5");
  try {
    CachingAllocator a(std::make_shared<HostResource>(), o);
    FAIL() << "accepted a threshold with no limit";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no limit to measure against"), std::string::npos);
  }
  EXPECT_NO_THROW(CachingAllocator(std::make_shared<SimulatedResource>(MiB * 64), o));
  EXPECT_NO_THROW(CachingAllocator(std::make_shared<HostResource>(),
                                   parse_alloc_conf("garbage_collection_threshold:0.5,capacity:1GiB")));
}

TEST(AllocConf, VirtualMemoryOptionsNeedAVirtualMemoryUpstream) {
  for (const char* conf : {"policy:vmm_stitch", "expandable_segments:True"}) {
    try {
      CachingAllocator a(std::make_shared<HostResource>(), parse_alloc_conf(conf));
      FAIL() << conf;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("needs a virtual-memory upstream"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace memtrain::memory
