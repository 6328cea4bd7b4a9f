// Stream events (CUDA event semantics on logical streams) and the tag registry.
#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

#include "memory/stream_registry.hpp"
#include "memory/tag_registry.hpp"

namespace memtrain::memory {
namespace {

TEST(StreamRegistry, EventsCompleteInStreamOrder) {
  StreamRegistry r;
  const StreamId s = r.create_stream();
  EXPECT_NE(s, kDefaultStream);
  const StreamEvent e1 = r.record_event(s);
  const StreamEvent e2 = r.record_event(s);
  EXPECT_FALSE(r.query(e1));
  EXPECT_EQ(r.outstanding(s), 2u);
  r.synchronize(e1);
  EXPECT_TRUE(r.query(e1));
  EXPECT_FALSE(r.query(e2)) << "waiting for an event does not complete later work";
  r.complete(s);
  EXPECT_TRUE(r.query(e2));
  EXPECT_EQ(r.outstanding(s), 0u);
  EXPECT_EQ(r.num_synchronizations(), 1u);
}

TEST(StreamRegistry, StreamsAreIndependentAndIdsUnique) {
  StreamRegistry r;
  std::set<StreamId> ids;
  for (int i = 0; i < 100; ++i) ids.insert(r.create_stream());
  EXPECT_EQ(ids.size(), 100u);
  const StreamEvent a = r.record_event(1);
  const StreamEvent b = r.record_event(2);
  r.complete(2);
  EXPECT_FALSE(r.query(a));
  EXPECT_TRUE(r.query(b));
}

TEST(TagRegistry, SameNameSameIdAcrossThreads) {
  TagRegistry r;
  std::vector<std::thread> threads;
  std::vector<TagId> ids(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) r.register_tag("tag-" + std::to_string(i));
      ids[t] = r.register_tag("activation");
    });
  }
  for (auto& th : threads) th.join();
  for (TagId id : ids) EXPECT_EQ(id, ids[0]);
  EXPECT_EQ(r.name(ids[0]), "activation");
  EXPECT_EQ(r.size(), 1u + 100u + 1u);  // untagged, 100 names, activation
  EXPECT_EQ(r.name(kUntagged), "untagged");
  EXPECT_EQ(r.name(60000), "tag60000");
  EXPECT_THROW(r.register_tag(""), std::invalid_argument);
}

TEST(TagRegistry, ProcessRegistryIsShared) {
  const TagId id = tag_registry().register_tag("registries_test_tag");
  EXPECT_EQ(tag_registry().register_tag("registries_test_tag"), id);
}

}  // namespace
}  // namespace memtrain::memory
