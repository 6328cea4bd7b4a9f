#include "memory/multi_job_report.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "memory/byte_size.hpp"

namespace memtrain::memory {

std::string MultiJobReport::to_json() const {
  nlohmann::json j = {{"policy", policy},
                      {"capacity_bytes", capacity_bytes},
                      {"release", release},
                      {"ticks", ticks},
                      {"events", events},
                      {"peak_allocated_bytes", peak_allocated_bytes},
                      {"peak_reserved_bytes", peak_reserved_bytes},
                      {"utilization", utilization},
                      {"device_utilization", device_utilization},
                      {"mean_utilization", mean_utilization},
                      {"mean_device_utilization", mean_device_utilization},
                      {"failures", failures},
                      {"failures_cached_memory_would_cover", failures_cached_memory_would_cover},
                      {"stranded_bytes_at_failures", stranded_bytes_at_failures},
                      {"max_stranded_bytes", max_stranded_bytes},
                      {"releases", releases},
                      {"released_bytes", released_bytes}};
  nlohmann::json js = nlohmann::json::array();
  for (const JobSummary& s : jobs) {
    js.push_back({{"name", s.name},
                  {"runs", s.runs},
                  {"failed_runs", s.failed_runs},
                  {"peak_allocated_bytes", s.peak_allocated_bytes},
                  {"peak_reserved_bytes", s.peak_reserved_bytes}});
  }
  j["jobs"] = std::move(js);
  nlohmann::json fs = nlohmann::json::array();
  for (const JobFailure& f : failure_list) {
    fs.push_back({{"job", f.job},
                  {"run", f.run},
                  {"tick", f.tick},
                  {"step", f.step},
                  {"line", f.line},
                  {"request_bytes", f.request_bytes},
                  {"device_free_bytes", f.device_free_bytes},
                  {"stranded_bytes", f.stranded_bytes},
                  {"stranded_releasable_bytes", f.stranded_releasable_bytes},
                  {"cached_memory_would_cover", f.cached_memory_would_cover}});
  }
  j["failure_list"] = std::move(fs);
  // Columns rather than one object per tick: a long workload has thousands of ticks.
  nlohmann::json t = {{"tick", nlohmann::json::array()},
                      {"active_jobs", nlohmann::json::array()},
                      {"allocated_bytes", nlohmann::json::array()},
                      {"reserved_bytes", nlohmann::json::array()},
                      {"peak_reserved_bytes", nlohmann::json::array()},
                      {"failures", nlohmann::json::array()}};
  for (const TickSample& s : timeline) {
    t["tick"].push_back(s.tick);
    t["active_jobs"].push_back(s.active_jobs);
    t["allocated_bytes"].push_back(s.allocated_bytes);
    t["reserved_bytes"].push_back(s.reserved_bytes);
    t["peak_reserved_bytes"].push_back(s.peak_reserved_bytes);
    t["failures"].push_back(s.failures);
  }
  j["timeline"] = std::move(t);
  return j.dump();
}

std::string MultiJobReport::to_text() const {
  std::ostringstream out;
  char buf[256];
  out << "policy " << policy << " on a shared simulated device of " << format_byte_size(capacity_bytes) << ", "
      << (release ? "cross-job release on" : "no cross-job release") << ": " << ticks << " ticks, " << events
      << " events\n";
  std::snprintf(buf, sizeof buf, "  peak allocated %s, peak reserved %s: utilization %.4f, device utilization %.4f\n",
                format_byte_size(peak_allocated_bytes).c_str(), format_byte_size(peak_reserved_bytes).c_str(),
                utilization, device_utilization);
  out << buf;
  std::snprintf(buf, sizeof buf, "  mean over ticks: utilization %.4f, device utilization %.4f\n", mean_utilization,
                mean_device_utilization);
  out << buf;
  out << "  out-of-memory failures " << failures << " (" << failures_cached_memory_would_cover
      << " that others' cached memory would have covered); stranded at failures "
      << format_byte_size(stranded_bytes_at_failures) << " in all, at most " << format_byte_size(max_stranded_bytes)
      << "\n";
  out << "  caches released for another job " << releases << " times, " << format_byte_size(released_bytes) << "\n";
  for (const JobSummary& s : jobs) {
    out << "  job " << s.name << ": " << s.runs << " run" << (s.runs == 1 ? "" : "s") << ", " << s.failed_runs
        << " failed; peak allocated " << format_byte_size(s.peak_allocated_bytes) << ", reserved "
        << format_byte_size(s.peak_reserved_bytes) << "\n";
  }
  for (const JobFailure& f : failure_list) {
    out << "  failed: job " << f.job << " run " << f.run << " at tick " << f.tick << " (its step " << f.step
        << (f.line > 0 ? ", trace line " + std::to_string(f.line) : std::string(", its arena"))
        << "): " << format_byte_size(f.request_bytes) << " requested, " << format_byte_size(f.device_free_bytes)
        << " free on the device, " << format_byte_size(f.stranded_bytes) << " stranded in other jobs' caches ("
        << format_byte_size(f.stranded_releasable_bytes) << " releasable)\n";
  }
  return out.str();
}

}  // namespace memtrain::memory
