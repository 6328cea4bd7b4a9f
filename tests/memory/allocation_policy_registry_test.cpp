// The policy registry: what each registration says of its policy before it is built must be what
// the built policy does, since the allocator, option checks and the CLI decide on it alone.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "memory/allocation_policy.hpp"
#include "memory/allocation_policy_registry.hpp"
#include "memory/allocator_options.hpp"

namespace memtrain::memory {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

// The order of the experiments' tables (docs/architecture.md, README): baseline first.
TEST(PolicyRegistry, ListsThePoliciesInReportOrder) {
  EXPECT_EQ(policy_names(), (std::vector<std::string>{"no_cache", "pytorch", "best_fit", "vmm_stitch"}));
  EXPECT_EQ(policy_name_list(), "no_cache, pytorch, best_fit, vmm_stitch");
}

TEST(PolicyRegistry, EachRegistrationDescribesThePolicyItBuilds) {
  for (const PolicyRegistration& r : registered_policies()) {
    SCOPED_TRACE(std::string(r.name));
    AllocatorOptions o;
    o.policy = std::string(r.name);
    // A policy that maps pages cannot run on a plain upstream; every other one can.
    if (r.maps_pages) {
      EXPECT_THROW(make_policy(o, 0), std::invalid_argument);
    } else {
      EXPECT_NE(make_policy(o, 0), nullptr);
    }
    const std::unique_ptr<AllocationPolicy> p = make_policy(o, 2 * MiB);
    EXPECT_EQ(p->name(), r.name);
    EXPECT_EQ(p->caches(), r.caches);
    EXPECT_EQ(p->stitches(), r.maps_pages);
    EXPECT_EQ(needs_virtual_memory(o), r.maps_pages);
    EXPECT_NO_THROW(validate_options(o, kUpstreamCapacityUnknown)) << "the defaults are valid for every policy";
  }
}

TEST(PolicyRegistry, UnknownNameListsTheRegisteredOnes) {
  EXPECT_EQ(find_policy("fastest"), nullptr);
  try {
    policy_registration("fastest");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "allocator policy 'fastest' is unknown; expected one of no_cache, pytorch, best_fit, vmm_stitch");
  }
  AllocatorOptions o;
  o.policy = "fastest";
  EXPECT_THROW(make_policy(o, 0), std::invalid_argument);
  EXPECT_FALSE(needs_virtual_memory(o)) << "validate_options refuses the name; this only answers";
}

TEST(PolicyRegistry, ExpandableSegmentsNeedVirtualMemoryUnderAnyPolicy) {
  AllocatorOptions o;
  o.policy = "best_fit";
  EXPECT_FALSE(needs_virtual_memory(o));
  o.expandable_segments = true;
  EXPECT_TRUE(needs_virtual_memory(o));
}

// A caching policy's options are refused by the one that does not cache, naming the others.
TEST(PolicyRegistry, NoCacheRefusesSplittingAndNamesTheCachingPolicies) {
  AllocatorOptions o;
  o.policy = "no_cache";
  o.max_split_size = 256 * MiB;
  try {
    validate_options(o, kUpstreamCapacityUnknown);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "max_split_size does nothing with policy no_cache (it never splits blocks); "
                 "unset it or choose pytorch, best_fit or vmm_stitch");
  }
}

// vmm_stitch keeps best_fit's block reuse rules (Note [vmm_stitch: map fragmented pages into one
// range]); only its large-pool split unit is a page instead of "more than 1 MiB".
TEST(PolicyRegistry, VmmStitchServesCachedBlocksAsBestFitDoes) {
  for (const std::size_t max_split : {kMaxSplitSizeUnset, 64 * MiB}) {
    AllocatorOptions o;
    o.max_split_size = max_split;
    o.policy = "best_fit";
    const auto best_fit = make_policy(o, 0);
    o.policy = "vmm_stitch";
    const auto stitch = make_policy(o, 2 * MiB);
    for (const std::size_t block : {2 * MiB, 40 * MiB, 64 * MiB, 100 * MiB}) {
      for (const std::size_t request : {2 * MiB, 30 * MiB, 64 * MiB, 82 * MiB, 100 * MiB}) {
        if (request > block) continue;
        SCOPED_TRACE(std::to_string(block) + " " + std::to_string(request) + " " + std::to_string(max_split));
        EXPECT_EQ(best_fit->may_serve(Pool::large, block, request), stitch->may_serve(Pool::large, block, request));
        EXPECT_EQ(best_fit->should_split(Pool::large, block, request),
                  stitch->should_split(Pool::large, block, request))
            << "remainders of whole pages above 1 MiB";
      }
    }
    EXPECT_TRUE(best_fit->should_split(Pool::small, MiB, MiB - 256));
    EXPECT_TRUE(stitch->should_split(Pool::small, MiB, MiB - 256));
    EXPECT_FALSE(best_fit->should_split(Pool::large, 4 * MiB, 3 * MiB)) << "1 MiB left: not more than 1 MiB";
    EXPECT_TRUE(stitch->should_split(Pool::large, 4 * MiB, 2 * MiB)) << "one whole page left";
  }
}

}  // namespace
}  // namespace memtrain::memory
