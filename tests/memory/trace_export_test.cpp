// The exports of a recorded trace: PyTorch-shaped snapshot JSON (and its pickle), Chrome trace
// counters, replay CSV. Expected values are worked out by hand from the synthetic events.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "memory/caching_allocator.hpp"
#include "memory/chrome_trace_json.hpp"
#include "memory/host_resource.hpp"
#include "memory/memory_snapshot_json.hpp"
#include "memory/replay.hpp"
#include "memory/tag_registry.hpp"
#include "memory/trace_csv_writer.hpp"
#include "memory/trace_recorder.hpp"

namespace memtrain::memory {
namespace {

TraceEvent event(TraceEventKind kind, std::uint64_t time_ns, std::uint64_t bytes, TagId tag, std::uint64_t id,
                 std::uintptr_t address = 0, StreamId stream = 0) {
  return {kind, time_ns, bytes, address, stream, tag, id};
}

// Two tags, one segment: the counters below follow from the events by hand.
std::vector<TraceEvent> synthetic_events(TagId act, TagId grad) {
  using K = TraceEventKind;
  return {
      event(K::segment_alloc, 1000, 4096, act, 1, 0x10000),
      event(K::alloc, 2000, 1024, act, 1, 0x10000),
      event(K::alloc, 3000, 512, grad, 2, 0x10400, 1),
      event(K::free, 4000, 1024, act, 1, 0x10000),
      event(K::oom, 5000, 1 << 30, grad, 0),
      event(K::segment_free, 6000, 4096, act, 1, 0x10000),
  };
}

TEST(ChromeTrace, CountersFollowAllocatedAndReservedBytesPerTag) {
  const TagId act = tag_registry().register_tag("activation");
  const TagId grad = tag_registry().register_tag("gradient");
  const auto j = chrome_trace_json(synthetic_events(act, grad));
  const auto& ev = j["traceEvents"];
  ASSERT_EQ(ev.size(), 7u);  // metadata + 5 counters + 1 instant
  EXPECT_EQ(ev[0]["ph"], "M");
  EXPECT_EQ(ev[1]["name"], "reserved_bytes");
  EXPECT_EQ(ev[1]["args"]["activation"], 4096);
  EXPECT_EQ(ev[1]["ts"], 0.0);
  EXPECT_EQ(ev[2]["name"], "allocated_bytes");
  EXPECT_EQ(ev[2]["args"]["total"], 1024);
  EXPECT_EQ(ev[2]["ts"], 1.0);  // (2000 - 1000) ns = 1 us
  EXPECT_EQ(ev[3]["args"]["gradient"], 512);
  EXPECT_EQ(ev[3]["args"]["activation"], 1024);
  EXPECT_EQ(ev[3]["args"]["total"], 1536);
  EXPECT_EQ(ev[4]["args"]["activation"], 0);
  EXPECT_EQ(ev[4]["args"]["total"], 512);
  EXPECT_EQ(ev[5]["name"], "oom");
  EXPECT_EQ(ev[5]["ph"], "i");
  EXPECT_EQ(ev[5]["args"]["tag"], "gradient");
  EXPECT_EQ(ev[6]["name"], "reserved_bytes");
  EXPECT_EQ(ev[6]["args"]["total"], 0);
  for (const auto& e : ev) {
    if (e["ph"] == "C") {
      EXPECT_GE(e["args"]["total"].get<std::int64_t>(), 0);
    }
  }
}

TEST(TraceCsvWriter, WritesAllocAndFreeRowsThatReadBack) {
  const TagId act = tag_registry().register_tag("activation");
  const TagId grad = tag_registry().register_tag("gradient");
  std::ostringstream out;
  write_trace_csv(out, synthetic_events(act, grad));
  EXPECT_EQ(out.str(),
            "op,id,bytes,stream,tag\n"
            "alloc,1,1024,0,activation\n"
            "alloc,2,512,1,gradient\n"
            "free,1,,0,\n");
  std::istringstream in(out.str());
  const auto ops = parse_trace_csv(in, "written.csv");
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[1].stream, 1u);
  EXPECT_EQ(ops[1].tag, "gradient");
  const TagId bad = tag_registry().register_tag("a,b");
  std::ostringstream sink;
  EXPECT_THROW(write_trace_csv(sink, {event(TraceEventKind::alloc, 0, 1, bad, 1)}), std::invalid_argument);
}

// A step event is the row `step,N,,,` (Note [Step boundaries in a trace]); reading it back
// gives the step and how many alloc and free rows came before it, and no alloc or free row.
TEST(TraceCsvWriter, StepEventsBecomeStepRowsThatReadBack) {
  const TagId act = tag_registry().register_tag("activation");
  using K = TraceEventKind;
  std::ostringstream out;
  write_trace_csv(out, {event(K::step, 0, 0, kUntagged, 0), event(K::alloc, 1, 1024, act, 1, 0x10000),
                        event(K::free, 2, 1024, act, 1, 0x10000), event(K::step, 3, 0, kUntagged, 1)});
  EXPECT_EQ(out.str(),
            "op,id,bytes,stream,tag\n"
            "step,0,,,\n"
            "alloc,1,1024,0,activation\n"
            "free,1,,0,\n"
            "step,1,,,\n");
  std::istringstream in(out.str());
  std::vector<StepMark> steps;
  const auto ops = parse_trace_csv(in, "written.csv", &steps);
  EXPECT_EQ(ops.size(), 2u);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].step, 0u);
  EXPECT_EQ(steps[0].op_index, 0u);
  EXPECT_EQ(steps[0].line, 2u);
  EXPECT_EQ(steps[1].step, 1u);
  EXPECT_EQ(steps[1].op_index, 2u);
}

TEST(MemorySnapshotJson, TraceEntriesUsePyTorchActions) {
  const TagId act = tag_registry().register_tag("activation");
  const TagId grad = tag_registry().register_tag("gradient");
  const auto j = memory_snapshot_json({}, synthetic_events(act, grad), /*device=*/1);
  ASSERT_EQ(j["device_traces"].size(), 2u);
  EXPECT_TRUE(j["device_traces"][0].empty());
  const auto& t = j["device_traces"][1];
  std::vector<std::string> actions;
  for (const auto& e : t) actions.push_back(e["action"]);
  EXPECT_EQ(actions, (std::vector<std::string>{"segment_alloc", "alloc", "alloc", "free_requested", "free_completed",
                                               "oom", "segment_free"}));
  EXPECT_EQ(t[1]["addr"], 0x10000);
  EXPECT_EQ(t[1]["size"], 1024);
  EXPECT_EQ(t[1]["time_us"], 1);
  EXPECT_EQ(t[2]["stream"], 1);
  EXPECT_EQ(t[2]["tag"], "gradient");
  EXPECT_TRUE(t[2]["frames"].is_array());
}

// A real allocator's snapshot: each segment's blocks tile it exactly, and the per-segment
// totals agree with the blocks' states (PyTorch's definitions of allocated/active size).
nlohmann::json snapshot_of_live_allocator() {
  TraceRecorder recorder;
  CachingAllocator allocator(std::make_shared<HostResource>(), AllocatorOptions{});
  allocator.set_event_sink(recorder.sink());
  const TagId act = tag_registry().register_tag("activation");
  Block a = allocator.allocate(3 << 20, 0, act);
  Block b = allocator.allocate(5 << 20, 0, act);
  Block c = allocator.allocate(1000, 0);
  allocator.deallocate(a);
  auto j = memory_snapshot_json(allocator.snapshot(), recorder.events());
  allocator.set_event_sink(nullptr);
  allocator.deallocate(b);
  allocator.deallocate(c);
  return j;
}

TEST(MemorySnapshotJson, SegmentsAreTiledByTheirBlocks) {
  const auto j = snapshot_of_live_allocator();
  ASSERT_FALSE(j["segments"].empty());
  std::size_t allocated_total = 0;
  for (const auto& s : j["segments"]) {
    std::uintptr_t cursor = s["address"];
    std::size_t allocated = 0, active = 0;
    for (const auto& b : s["blocks"]) {
      EXPECT_EQ(b["address"].get<std::uintptr_t>(), cursor);
      cursor += b["size"].get<std::size_t>();
      if (b["state"] == "active_allocated") allocated += b["size"].get<std::size_t>();
      if (b["state"] != "inactive") active += b["size"].get<std::size_t>();
    }
    EXPECT_EQ(cursor, s["address"].get<std::uintptr_t>() + s["total_size"].get<std::size_t>());
    EXPECT_EQ(s["allocated_size"].get<std::size_t>(), allocated);
    EXPECT_EQ(s["active_size"].get<std::size_t>(), active);
    allocated_total += allocated;
  }
  EXPECT_GE(allocated_total, (5u << 20) + 1000);
  EXPECT_FALSE(j["device_traces"][0].empty());
}

// The pickle must hold the same data as the JSON, read back with Python's pickle (what the
// visualizer's loader is fed); only the "stitched" state is renamed.
TEST(SnapshotToPickle, PickleReadsBackAsTheSnapshot) {
  if (std::system("test -x /usr/bin/python3") != 0) GTEST_SKIP() << "/usr/bin/python3 missing";
  auto j = snapshot_of_live_allocator();
  j["segments"][0]["blocks"][0]["state"] = "stitched";
  const std::string dir = ::testing::TempDir();
  const std::string json_path = dir + "/snap.json", pickle_path = dir + "/snap.pickle";
  std::ofstream(json_path) << j.dump();
  const std::string script = std::string(MEMTRAIN_SOURCE_DIR) + "/scripts/snapshot_to_pickle.py";
  ASSERT_EQ(std::system(("/usr/bin/python3 " + script + " " + json_path + " " + pickle_path).c_str()), 0);
  const std::string check =
      "/usr/bin/python3 -c \"import json,pickle,sys\n"
      "p=pickle.load(open(sys.argv[1],'rb')); j=json.load(open(sys.argv[2]))\n"
      "assert p['segments'][0]['blocks'][0]['state']=='inactive'\n"
      "j['segments'][0]['blocks'][0]['state']='inactive'\n"
      "assert p==j, 'pickle differs from json'\n"
      "assert isinstance(p['device_traces'][0][0]['addr'], int)\" " +
      pickle_path + " " + json_path;
  EXPECT_EQ(std::system(check.c_str()), 0);
  // Not a snapshot: exit 2 with a message.
  std::ofstream(json_path) << "[1, 2]";
  const int rc =
      std::system(("/usr/bin/python3 " + script + " " + json_path + " " + pickle_path + " 2>/dev/null").c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  std::remove(json_path.c_str());
  std::remove(pickle_path.c_str());
}

}  // namespace
}  // namespace memtrain::memory
