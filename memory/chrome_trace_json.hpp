#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "memory/trace_event.hpp"

namespace memtrain::memory {

// Counter tracks for Perfetto / chrome://tracing, in the Trace Event Format (Google,
// "Trace Event Format", counter events "ph":"C", instant events "ph":"i"):
//   {"traceEvents": [...], "displayTimeUnit": "ms"}
// After every alloc/free an "allocated_bytes" counter event whose args hold the current bytes of
// every tag seen so far plus "total"; after every segment_alloc/segment_free a "reserved_bytes"
// counter likewise (a segment is charged to the tag of the event that made it); an instant
// event "oom" (args: bytes, tag) for each failed request. A free is matched to its alloc by
// allocation_id (segments by their id), so the counters never depend on the free event's own
// size. ts is in microseconds from the first event. pid 0 is named `process_name`.
nlohmann::json chrome_trace_json(const std::vector<TraceEvent>& events,
                                 const std::string& process_name = "memtrain memory");

}  // namespace memtrain::memory
