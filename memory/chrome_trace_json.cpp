#include "memory/chrome_trace_json.hpp"

#include <map>
#include <unordered_map>

#include "memory/tag_registry.hpp"

namespace memtrain::memory {
namespace {

// Current bytes per tag name (ordered so the args come out stable) and their sum.
struct Tracks {
  std::map<std::string, std::int64_t> by_tag;
  std::int64_t total = 0;
  void add(const std::string& tag, std::int64_t delta) {
    by_tag[tag] += delta;
    total += delta;
  }
  nlohmann::json args() const {
    nlohmann::json a = nlohmann::json::object();
    for (const auto& [tag, bytes] : by_tag) a[tag] = bytes;
    a["total"] = total;
    return a;
  }
};

}  // namespace

nlohmann::json chrome_trace_json(const std::vector<TraceEvent>& events, const std::string& process_name) {
  nlohmann::json trace = nlohmann::json::array();
  trace.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"tid", 0}, {"args", {{"name", process_name}}}});
  const std::uint64_t t0 = events.empty() ? 0 : events.front().time_ns;
  Tracks allocated, reserved;
  struct Held {
    std::int64_t bytes;
    std::string tag;
  };
  std::unordered_map<std::uint64_t, Held> live_blocks, live_segments;
  auto counter = [&](const char* name, const TraceEvent& e, const Tracks& tracks) {
    trace.push_back({{"name", name},
                     {"ph", "C"},
                     {"pid", 0},
                     {"tid", 0},
                     {"ts", static_cast<double>(e.time_ns - t0) / 1000.0},
                     {"args", tracks.args()}});
  };
  for (const TraceEvent& e : events) {
    const std::string tag = tag_registry().name(e.tag);
    switch (e.kind) {
      case TraceEventKind::alloc:
        live_blocks[e.allocation_id] = {static_cast<std::int64_t>(e.bytes), tag};
        allocated.add(tag, static_cast<std::int64_t>(e.bytes));
        counter("allocated_bytes", e, allocated);
        break;
      case TraceEventKind::free:
        if (auto it = live_blocks.find(e.allocation_id); it != live_blocks.end()) {
          allocated.add(it->second.tag, -it->second.bytes);
          live_blocks.erase(it);
          counter("allocated_bytes", e, allocated);
        }
        break;
      case TraceEventKind::segment_alloc:
        live_segments[e.allocation_id] = {static_cast<std::int64_t>(e.bytes), tag};
        reserved.add(tag, static_cast<std::int64_t>(e.bytes));
        counter("reserved_bytes", e, reserved);
        break;
      case TraceEventKind::segment_free:
        if (auto it = live_segments.find(e.allocation_id); it != live_segments.end()) {
          reserved.add(it->second.tag, -it->second.bytes);
          live_segments.erase(it);
          counter("reserved_bytes", e, reserved);
        }
        break;
      case TraceEventKind::oom:
        trace.push_back({{"name", "oom"},
                         {"ph", "i"},
                         {"s", "p"},
                         {"pid", 0},
                         {"tid", 0},
                         {"ts", static_cast<double>(e.time_ns - t0) / 1000.0},
                         {"args", {{"bytes", e.bytes}, {"tag", tag}}}});
        break;
      case TraceEventKind::step:
        trace.push_back({{"name", "step " + std::to_string(e.allocation_id)},
                         {"ph", "i"},
                         {"s", "p"},
                         {"pid", 0},
                         {"tid", 0},
                         {"ts", static_cast<double>(e.time_ns - t0) / 1000.0}});
        break;
      case TraceEventKind::segment_map:
      case TraceEventKind::segment_unmap:
        break;  // mapping moves pages between ranges; reserved bytes do not change
    }
  }
  return {{"traceEvents", std::move(trace)}, {"displayTimeUnit", "ms"}};
}

}  // namespace memtrain::memory
