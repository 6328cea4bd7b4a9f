#include "runtime/train/memory_outputs.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

#include "memory/tag_registry.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::train {
namespace {

using nlohmann::ordered_json;

ordered_json counter(const memory::StatCounter& c) {
  return ordered_json{{"current", c.current}, {"peak", c.peak}, {"allocated", c.allocated},
                      {"freed", c.freed}};
}

ordered_json snapshot_json(const memory::CachingAllocator& allocator) {
  ordered_json segments = ordered_json::array();
  for (const auto& s : allocator.snapshot()) {
    ordered_json blocks = ordered_json::array();
    for (const auto& b : s.blocks) {
      blocks.push_back({{"address", b.address},
                        {"size", b.size},
                        {"requested_size", b.requested_size},
                        {"state", b.state},
                        {"tag", memory::tag_registry().name(b.tag)}});
    }
    segments.push_back({{"address", s.address},
                        {"total_size", s.total_size},
                        {"allocated_size", s.allocated_size},
                        {"active_size", s.active_size},
                        {"requested_size", s.requested_size},
                        {"stream", s.stream},
                        {"segment_type", s.segment_type},
                        {"is_expandable", s.is_expandable},
                        {"blocks", std::move(blocks)}});
  }
  const auto st = allocator.stats();
  ordered_json stats{{"allocated_bytes", counter(st.allocated_bytes)},
                     {"reserved_bytes", counter(st.reserved_bytes)},
                     {"active_bytes", counter(st.active_bytes)},
                     {"inactive_split_bytes", counter(st.inactive_split_bytes)},
                     {"requested_bytes", counter(st.requested_bytes)},
                     {"num_alloc_retries", st.num_alloc_retries},
                     {"num_ooms", st.num_ooms},
                     {"fragmentation", st.fragmentation},
                     {"utilization", st.utilization}};
  ordered_json per_tag = ordered_json::object();
  for (const auto& [tag, ts] : st.per_tag) {
    per_tag[memory::tag_registry().name(tag)] = {{"allocated_bytes", counter(ts.allocated_bytes)},
                                                 {"active_bytes", counter(ts.active_bytes)}};
  }
  stats["per_tag"] = std::move(per_tag);
  return ordered_json{{"policy", std::string(allocator.policy_name())},
                      {"segments", std::move(segments)},
                      {"stats", std::move(stats)}};
}

// Chrome trace event format, "C" (counter) events; ts in microseconds.
ordered_json trace_json(const MemoryTrace& trace) {
  ordered_json events = ordered_json::array();
  std::int64_t allocated = 0, reserved = 0;
  const std::uint64_t t0 = trace.events().empty() ? 0 : trace.events().front().time_ns;
  for (const auto& e : trace.events()) {
    const auto bytes = static_cast<std::int64_t>(e.bytes);
    switch (e.kind) {
      case memory::TraceEventKind::alloc: allocated += bytes; break;
      case memory::TraceEventKind::free: allocated -= bytes; break;
      case memory::TraceEventKind::segment_alloc:
      case memory::TraceEventKind::segment_map: reserved += bytes; break;
      case memory::TraceEventKind::segment_free:
      case memory::TraceEventKind::segment_unmap: reserved -= bytes; break;
      case memory::TraceEventKind::oom: break;
    }
    events.push_back({{"name", "memory"},
                      {"ph", "C"},
                      {"ts", static_cast<double>(e.time_ns - t0) / 1e3},
                      {"pid", 0},
                      {"args", {{"allocated_bytes", allocated}, {"reserved_bytes", reserved}}}});
  }
  return ordered_json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

void write_json(const std::string& path, const ordered_json& j) {
  std::ofstream out(path, std::ios::trunc);
  out << j.dump() << '\n';
  out.flush();
  if (!out) throw RuntimeError("cannot write " + path);
}

}  // namespace

MemoryTrace::~MemoryTrace() {
  if (allocator_) allocator_->set_event_sink(nullptr);
}

void MemoryTrace::attach(memory::CachingAllocator& allocator) {
  allocator_ = &allocator;
  allocator.set_event_sink([this](const memory::TraceEvent& e) { events_.push_back(e); });
}

void write_memory_outputs(const memory::CachingAllocator& allocator, const MemoryTrace& trace,
                          const RunDirectory& run_dir) {
  write_json(run_dir.file("memory_snapshot.json"), snapshot_json(allocator));
  if (trace.attached()) write_json(run_dir.file("memory_trace.json"), trace_json(trace));
}

}  // namespace memtrain::train
