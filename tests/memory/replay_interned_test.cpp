// intern_trace and replay_interned_trace (replay.hpp, Note [Replay interns ids and tags once]).
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>

#include "memory/caching_allocator.hpp"
#include "memory/out_of_memory.hpp"
#include "memory/replay.hpp"
#include "memory/simulated_resource.hpp"
#include "memory/simulated_virtual_memory_resource.hpp"
#include "memory/stream_registry.hpp"
#include "memory/tag_registry.hpp"

namespace memtrain::memory {
namespace {

constexpr std::size_t kMiB = 1 << 20;

std::vector<TraceOp> ops_of(const std::string& csv) {
  std::istringstream in("op,id,bytes,stream,tag\n" + csv);
  return parse_trace_csv(in, "test.csv");
}

// Hand-written expectations: ids get indices by first appearance and keep them when reused
// after a free; tags likewise, with 0 for untagged; a free row's tag is not interned.
TEST(InternTrace, IdsAndTagsBecomeDenseIndicesByFirstAppearance) {
  const auto ops = ops_of(
      "alloc,x,10,0,activation\nalloc,y,20,2,\nfree,x,,,ghost\n"
      "alloc,x,30,1,gradient\nalloc,z,40,0,activation\nfree,y\n");
  const InternedTrace t = intern_trace(ops);
  ASSERT_EQ(t.ops.size(), 6u);
  EXPECT_EQ(t.ids, (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ(t.tags, (std::vector<std::string>{"", "activation", "gradient"}));
  const std::uint32_t ids[] = {0, 1, 0, 0, 2, 1};
  const std::uint32_t tags[] = {1, 0, 0, 2, 1, 0};
  const bool allocs[] = {true, true, false, true, true, false};
  const std::size_t bytes[] = {10, 20, 0, 30, 40, 0};
  const StreamId streams[] = {0, 2, 0, 1, 0, 0};
  for (std::size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(t.ops[i].id, ids[i]) << i;
    EXPECT_EQ(t.ops[i].tag, tags[i]) << i;
    EXPECT_EQ(t.ops[i].alloc, allocs[i]) << i;
    EXPECT_EQ(t.ops[i].bytes, bytes[i]) << i;
    EXPECT_EQ(t.ops[i].stream, streams[i]) << i;
    EXPECT_EQ(t.lines[i], i + 2) << i;  // line 1 is the header
  }
}

// The reference: the allocator driven directly, live blocks found by id text in a std::map,
// tags registered per alloc. Interning must not change what replay reports.
struct Reference {
  std::size_t peak_allocated = 0, peak_reserved = 0, num_ooms = 0;
  std::optional<std::size_t> first_oom_event;
};

Reference replay_directly(const std::vector<TraceOp>& ops, const std::string& policy, std::size_t capacity) {
  std::shared_ptr<MemoryResource> device;
  if (policy == "vmm_stitch") {
    device = std::make_shared<SimulatedVirtualMemoryResource>(capacity, "reference");
  } else {
    device = std::make_shared<SimulatedResource>(capacity, "reference");
  }
  AllocatorOptions options;
  options.policy = policy;
  CachingAllocator allocator(device, options);
  StreamRegistry streams;
  allocator.set_stream_registry(&streams);
  Reference r;
  std::map<std::string, Block> live;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const TraceOp& op = ops[i];
    if (op.kind == TraceOp::Kind::alloc) {
      const TagId tag = op.tag.empty() ? kUntagged : tag_registry().register_tag(op.tag);
      try {
        live[op.id] = allocator.allocate(op.bytes, op.stream, tag);
      } catch (const OutOfMemory&) {
        if (!r.first_oom_event) r.first_oom_event = i;
      }
    } else if (const auto it = live.find(op.id); it != live.end()) {
      allocator.deallocate(it->second);
      live.erase(it);
    }
  }
  const MemoryStats s = allocator.stats();
  r.peak_allocated = static_cast<std::size_t>(s.allocated_bytes.peak);
  r.peak_reserved = static_cast<std::size_t>(s.reserved_bytes.peak);
  r.num_ooms = static_cast<std::size_t>(s.num_ooms);
  for (auto& [id, block] : live) allocator.deallocate(block);
  return r;
}

// A random trace on two streams whose ids are reused after their free, on a device small
// enough that some allocs fail (their frees must then be skipped).
TEST(ReplayInternedTrace, MatchesTheAllocatorDrivenDirectly) {
  std::mt19937_64 rng(17);
  std::ostringstream csv;
  std::vector<int> live, dead;
  const char* const tags[] = {"", "activation", "temporary"};
  for (int i = 0; i < 3000; ++i) {
    if (!live.empty() && (rng() % 2 == 0 || live.size() > 40)) {
      const std::size_t k = rng() % live.size();
      csv << "free," << live[k] << "\n";
      dead.push_back(live[k]);
      live.erase(live.begin() + static_cast<long>(k));
    } else {
      int id = static_cast<int>(live.size() + dead.size());
      if (!dead.empty() && rng() % 2 == 0) {
        id = dead.back();
        dead.pop_back();
      }
      csv << "alloc," << id << "," << 1 + rng() % (6 * kMiB) << "," << rng() % 2 << "," << tags[rng() % 3] << "\n";
      live.push_back(id);
    }
  }
  const auto ops = ops_of(csv.str());
  const InternedTrace interned = intern_trace(ops);
  for (const char* policy : {"no_cache", "pytorch", "best_fit", "vmm_stitch"}) {
    const Reference want = replay_directly(ops, policy, 96 * kMiB);
    const ReplayReport got = replay_interned_trace(interned, policy, 96 * kMiB);
    EXPECT_GT(want.num_ooms, 0u) << policy << ": the device should be tight enough to fail some allocs";
    EXPECT_EQ(got.peak_allocated_bytes, want.peak_allocated) << policy;
    EXPECT_EQ(got.peak_reserved_bytes, want.peak_reserved) << policy;
    EXPECT_EQ(got.num_ooms, want.num_ooms) << policy;
    EXPECT_EQ(got.first_oom_event, want.first_oom_event) << policy;
    EXPECT_EQ(got.events, ops.size()) << policy;
  }
}

TEST(ReplayInternedTrace, AHandBuiltTraceWithIndicesPastItsTablesIsRejected) {
  InternedTrace t = intern_trace(ops_of("alloc,a,10,0,\n"));
  t.ops[0].id = 5;
  try {
    replay_interned_trace(t, "best_fit", 64 * kMiB, "hand");
    FAIL() << "expected TraceFormatError";
  } catch (const TraceFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("hand:2: interned op names id 5"), std::string::npos) << e.what();
  }
  t = intern_trace(ops_of("alloc,a,10,0,\n"));
  t.lines.clear();
  EXPECT_THROW(replay_interned_trace(t, "best_fit", 64 * kMiB), std::invalid_argument);
}

}  // namespace
}  // namespace memtrain::memory
