#include "memory/trace_event.hpp"

namespace memtrain::memory {

std::string_view to_string(TraceEventKind kind) {
  switch (kind) {
    case TraceEventKind::alloc:
      return "alloc";
    case TraceEventKind::free:
      return "free";
    case TraceEventKind::segment_alloc:
      return "segment_alloc";
    case TraceEventKind::segment_free:
      return "segment_free";
    case TraceEventKind::segment_map:
      return "segment_map";
    case TraceEventKind::segment_unmap:
      return "segment_unmap";
    case TraceEventKind::oom:
      return "oom";
    case TraceEventKind::step:
      return "step";
  }
  return "unknown";
}

}  // namespace memtrain::memory
