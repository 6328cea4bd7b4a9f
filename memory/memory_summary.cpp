#include "memory/memory_summary.hpp"

#include <cstdio>
#include <sstream>

#include "memory/byte_size.hpp"
#include "memory/tag_registry.hpp"

namespace memtrain::memory {
namespace {

std::string bytes(std::int64_t v) {
  // Counters are never negative; a negative value is a bug that the summary must show as is.
  // (insert, not "-" + string: GCC 12 reports a false -Wrestrict overlap for the latter.)
  if (v < 0) return format_byte_size(static_cast<std::size_t>(-v)).insert(0, 1, '-');
  return format_byte_size(static_cast<std::size_t>(v));
}

// The name column fits the longest tag row, "  optimizer_state allocated" (27 characters).
void row(std::ostringstream& out, std::string_view name, const StatCounter& c) {
  char line[160];
  std::snprintf(line, sizeof line, "| %-28s| %12s | %12s | %12s | %12s |\n", std::string(name).c_str(),
                bytes(c.current).c_str(), bytes(c.peak).c_str(), bytes(c.allocated).c_str(), bytes(c.freed).c_str());
  out << line;
}

}  // namespace

std::string format_memory_summary(const MemoryStats& s, std::string_view title) {
  const std::string rule(89, '=');
  const std::string thin(89, '-');
  std::ostringstream out;
  out << '|' << rule << "|\n";
  out << "| memtrain memory summary: " << title << '\n';
  out << '|' << thin << "|\n";
  char header[160];
  std::snprintf(header, sizeof header, "| %-28s| %12s | %12s | %12s | %12s |\n", "Metric", "Cur Usage", "Peak Usage",
                "Tot Alloc", "Tot Freed");
  out << header << '|' << thin << "|\n";
  row(out, "Allocated memory", s.allocated_bytes);
  row(out, "Active memory", s.active_bytes);
  row(out, "Requested memory", s.requested_bytes);
  row(out, "Reserved memory", s.reserved_bytes);
  row(out, "Non-releasable memory", s.inactive_split_bytes);
  if (!s.per_tag.empty()) {
    out << '|' << thin << "|\n";
    for (const auto& [tag, t] : s.per_tag) {
      row(out, "  " + tag_registry().name(tag) + " allocated", t.allocated_bytes);
    }
  }
  out << '|' << thin << "|\n";
  char tail[256];
  std::snprintf(tail, sizeof tail,
                "| Allocation retries: %lld   OOMs: %lld   device allocs: %lld   device frees: %lld\n"
                "| Fragmentation: %.3f (at peak reserved %.3f)   Utilization: %.3f\n",
                static_cast<long long>(s.num_alloc_retries), static_cast<long long>(s.num_ooms),
                static_cast<long long>(s.num_device_alloc), static_cast<long long>(s.num_device_free), s.fragmentation,
                s.fragmentation_at_peak_reserved, s.utilization);
  out << tail << '|' << rule << "|\n";
  return out.str();
}

}  // namespace memtrain::memory
