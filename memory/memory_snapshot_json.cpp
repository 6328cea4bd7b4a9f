#include "memory/memory_snapshot_json.hpp"

#include "memory/tag_registry.hpp"

namespace memtrain::memory {
namespace {

nlohmann::json trace_entry(const char* action, const TraceEvent& e, std::uint64_t t0) {
  return {{"action", action},
          {"addr", e.address},
          {"size", e.bytes},
          {"stream", e.stream},
          {"time_us", (e.time_ns - t0) / 1000},
          {"tag", tag_registry().name(e.tag)},
          {"allocation_id", e.allocation_id},
          {"frames", nlohmann::json::array()}};
}

}  // namespace

nlohmann::json memory_snapshot_json(const std::vector<SegmentSnapshot>& segments, const std::vector<TraceEvent>& events,
                                    int device) {
  nlohmann::json out;
  nlohmann::json& segs = out["segments"] = nlohmann::json::array();
  for (const SegmentSnapshot& s : segments) {
    nlohmann::json blocks = nlohmann::json::array();
    for (const BlockSnapshot& b : s.blocks) {
      blocks.push_back({{"address", b.address},
                        {"size", b.size},
                        {"requested_size", b.requested_size},
                        {"state", b.state},
                        {"tag", tag_registry().name(b.tag)},
                        {"frames", nlohmann::json::array()}});
    }
    segs.push_back({{"device", device},
                    {"address", s.address},
                    {"total_size", s.total_size},
                    {"allocated_size", s.allocated_size},
                    {"active_size", s.active_size},
                    {"requested_size", s.requested_size},
                    {"stream", s.stream},
                    {"segment_type", s.segment_type},
                    {"segment_pool_id", {0, 0}},
                    {"is_expandable", s.is_expandable},
                    {"is_stitched", s.is_stitched},
                    {"frames", nlohmann::json::array()},
                    {"blocks", std::move(blocks)}});
  }
  nlohmann::json trace = nlohmann::json::array();
  const std::uint64_t t0 = events.empty() ? 0 : events.front().time_ns;
  for (const TraceEvent& e : events) {
    switch (e.kind) {
      case TraceEventKind::free:
        // PyTorch splits a free into the request and the moment the memory is reusable; ours
        // reports the request and the allocator completes it in the same call.
        trace.push_back(trace_entry("free_requested", e, t0));
        trace.push_back(trace_entry("free_completed", e, t0));
        break;
      case TraceEventKind::step:
        break;  // not an allocator action: PyTorch's snapshot viewer knows none by this name
      default:
        trace.push_back(trace_entry(std::string(to_string(e.kind)).c_str(), e, t0));
    }
  }
  // One trace per device, indexed by device number.
  out["device_traces"] = nlohmann::json::array();
  for (int d = 0; d < device; ++d) out["device_traces"].push_back(nlohmann::json::array());
  out["device_traces"].push_back(std::move(trace));
  return out;
}

}  // namespace memtrain::memory
