#include "memory/trace_csv_writer.hpp"

#include <stdexcept>
#include <string>

#include "memory/tag_registry.hpp"

namespace memtrain::memory {

void write_trace_csv(std::ostream& out, const std::vector<TraceEvent>& events) {
  out << "op,id,bytes,stream,tag\n";
  for (const TraceEvent& e : events) {
    if (e.kind == TraceEventKind::alloc) {
      const std::string tag = e.tag == kUntagged ? std::string() : tag_registry().name(e.tag);
      if (tag.find_first_of(",#\r\n") != std::string::npos) {
        throw std::invalid_argument("write_trace_csv: tag name '" + tag +
                                    "' contains ',', '#' or a line break; the CSV could not be read back");
      }
      out << "alloc," << e.allocation_id << ',' << e.bytes << ',' << e.stream << ',' << tag << '\n';
    } else if (e.kind == TraceEventKind::free) {
      out << "free," << e.allocation_id << ",," << e.stream << ",\n";
    } else if (e.kind == TraceEventKind::step) {
      out << "step," << e.allocation_id << ",,,\n";
    }
  }
}

}  // namespace memtrain::memory
