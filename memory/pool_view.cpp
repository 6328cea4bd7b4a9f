#include "memory/pool_view.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <sstream>

#include "memory/byte_size.hpp"

namespace memtrain::memory {
namespace {

// A job's figures summed over its processes (pool_json's comment says how).
struct JobTotals {
  std::size_t allocated = 0, reserved = 0, peak_reserved = 0, releasable = 0;
  std::int64_t step = 0, num_ooms = 0;
  double tokens_per_s = 0, fragmentation = 0;
  JobState state = JobState::starting;
  std::string policy;
};

JobTotals totals_of(const LedgerEntry& e) {
  JobTotals t;
  bool first = true;
  for (const LedgerMember& m : e.members) {
    const MemberFigures& f = m.figures;
    t.allocated += f.allocated_bytes;
    t.reserved += f.reserved_bytes;
    t.peak_reserved += f.peak_reserved_bytes;
    t.releasable += f.releasable_bytes;
    t.num_ooms += f.num_ooms;
    t.tokens_per_s += f.tokens_per_s;
    t.fragmentation = std::max(t.fragmentation, f.fragmentation);
    t.step = first ? f.step : std::min(t.step, f.step);
    if (first) {
      t.state = f.state;
      t.policy = f.policy;
    }
    if (f.state == JobState::waiting) t.state = JobState::waiting;
    first = false;
  }
  return t;
}

// Prometheus label values escape backslash, double quote and line feed.
std::string escape_label(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

nlohmann::ordered_json pool_json(const std::string& ledger, const std::string& host, const LedgerSnapshot& snap) {
  nlohmann::ordered_json doc;
  doc["ledger"] = ledger;
  doc["host"] = host;
  doc["capacity_bytes"] = snap.capacity_bytes;
  doc["committed_bytes"] = snap.committed_bytes;
  doc["reserved_bytes"] = snap.reserved_bytes;
  doc["jobs"] = nlohmann::ordered_json::array();
  for (const LedgerEntry& e : snap.jobs) {
    const JobTotals t = totals_of(e);
    nlohmann::ordered_json j;
    j["run_dir"] = e.key;
    j["name"] = e.name;
    j["ranks"] = e.members.size();
    j["pids"] = nlohmann::ordered_json::array();
    for (const LedgerMember& m : e.members) j["pids"].push_back(m.pid);
    j["state"] = job_state_name(t.state);
    j["step"] = t.step;
    j["allocated_bytes"] = t.allocated;
    j["reserved_bytes"] = t.reserved;
    j["peak_reserved_bytes"] = t.peak_reserved;
    j["releasable_bytes"] = t.releasable;
    j["charged_bytes"] = e.in_use_bytes;
    j["reservation_bytes"] = e.reservation;
    j["limit_bytes"] = e.limit == kNoLimit ? nlohmann::ordered_json() : nlohmann::ordered_json(e.limit);
    j["tokens_per_s"] = t.tokens_per_s;
    j["fragmentation"] = t.fragmentation;
    j["policy"] = t.policy;
    j["num_ooms"] = t.num_ooms;
    j["releases"] = e.releases;
    j["released_bytes"] = e.released_bytes;
    j["per_rank"] = nlohmann::ordered_json::array();
    for (const LedgerMember& m : e.members) {
      const MemberFigures& f = m.figures;
      j["per_rank"].push_back({{"pid", m.pid},
                               {"state", job_state_name(f.state)},
                               {"step", f.step},
                               {"allocated_bytes", f.allocated_bytes},
                               {"reserved_bytes", f.reserved_bytes},
                               {"releasable_bytes", f.releasable_bytes},
                               {"charged_bytes", m.in_use_bytes}});
    }
    doc["jobs"].push_back(std::move(j));
  }
  return doc;
}

std::string pool_table(const std::string& ledger, const std::string& host, const LedgerSnapshot& snap) {
  std::ostringstream os;
  os << "ledger " << ledger << " on " << host << ": capacity " << format_byte_size(snap.capacity_bytes)
     << ", committed " << format_byte_size(snap.committed_bytes) << ", reserved "
     << format_byte_size(snap.reserved_bytes) << ", " << snap.jobs.size() << (snap.jobs.size() == 1 ? " job" : " jobs")
     << "\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-24s %-13s %8s %5s %11s %11s %11s %11s %11s %10s %4s\n", "JOB", "STATE", "STEP",
                "RANKS", "ALLOCATED", "RESERVED", "RELEASABLE", "RESERVATION", "LIMIT", "TOKENS/S", "OOMS");
  os << line;
  for (const LedgerEntry& e : snap.jobs) {
    const JobTotals t = totals_of(e);
    std::snprintf(line, sizeof line, "%-24.24s %-13s %8lld %5zu %11s %11s %11s %11s %11s %10.0f %4lld\n",
                  e.name.c_str(), job_state_name(t.state), static_cast<long long>(t.step), e.members.size(),
                  format_byte_size(t.allocated).c_str(), format_byte_size(t.reserved).c_str(),
                  format_byte_size(t.releasable).c_str(), format_byte_size(e.reservation).c_str(),
                  e.limit == kNoLimit ? "-" : format_byte_size(e.limit).c_str(), t.tokens_per_s,
                  static_cast<long long>(t.num_ooms));
    os << line;
  }
  return os.str();
}

std::string pool_prometheus(const std::string& ledger, const std::string& host, const LedgerSnapshot& snap) {
  std::ostringstream os;
  const std::string pool_labels = "ledger=\"" + escape_label(ledger) + "\",host=\"" + escape_label(host) + "\"";
  const auto family = [&](const char* name, const char* type, const char* help) {
    os << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << "\n";
  };
  family("memtrain_pool_capacity_bytes", "gauge", "Capacity of the shared ledger in bytes.");
  os << "memtrain_pool_capacity_bytes{" << pool_labels << "} " << snap.capacity_bytes << "\n";
  family("memtrain_pool_committed_bytes", "gauge",
         "Bytes the ledger's jobs hold: the sum over jobs of max(charged, reservation).");
  os << "memtrain_pool_committed_bytes{" << pool_labels << "} " << snap.committed_bytes << "\n";
  family("memtrain_pool_jobs", "gauge", "Jobs on the ledger.");
  os << "memtrain_pool_jobs{" << pool_labels << "} " << snap.jobs.size() << "\n";

  std::vector<std::pair<std::string, JobTotals>> jobs;
  for (const LedgerEntry& e : snap.jobs) {
    jobs.emplace_back(pool_labels + ",job=\"" + escape_label(e.name) + "\",run_dir=\"" + escape_label(e.key) + "\"",
                      totals_of(e));
  }
  const auto per_job = [&](const char* name, const char* type, const char* help,
                           const std::function<std::string(std::size_t)>& value) {
    family(name, type, help);
    for (std::size_t i = 0; i < jobs.size(); ++i) os << name << '{' << jobs[i].first << "} " << value(i) << "\n";
  };
  const auto& e = snap.jobs;
  per_job("memtrain_job_allocated_bytes", "gauge", "Bytes allocated by the job's tensors, summed over its ranks.",
          [&](std::size_t i) { return std::to_string(jobs[i].second.allocated); });
  per_job("memtrain_job_reserved_bytes", "gauge", "Bytes the job's allocators reserved, summed over its ranks.",
          [&](std::size_t i) { return std::to_string(jobs[i].second.reserved); });
  per_job("memtrain_job_peak_reserved_bytes", "gauge", "Peak reserved bytes, summed over the job's ranks.",
          [&](std::size_t i) { return std::to_string(jobs[i].second.peak_reserved); });
  per_job("memtrain_job_releasable_bytes", "gauge", "Cached bytes the job could release to other jobs.",
          [&](std::size_t i) { return std::to_string(jobs[i].second.releasable); });
  per_job("memtrain_job_charged_bytes", "gauge", "Bytes charged to the job in the ledger.",
          [&](std::size_t i) { return std::to_string(e[i].in_use_bytes); });
  per_job("memtrain_job_reservation_bytes", "gauge", "The job's reservation (memory.reservation).",
          [&](std::size_t i) { return std::to_string(e[i].reservation); });
  per_job("memtrain_job_step", "gauge", "Optimizer steps done by the job's slowest rank.",
          [&](std::size_t i) { return std::to_string(jobs[i].second.step); });
  per_job("memtrain_job_ranks", "gauge", "Processes of the job on this host.",
          [&](std::size_t i) { return std::to_string(e[i].members.size()); });
  per_job("memtrain_job_tokens_per_second", "gauge", "Training throughput of the job's last step, tokens/s.",
          [&](std::size_t i) { return number(jobs[i].second.tokens_per_s); });
  per_job("memtrain_job_fragmentation_ratio", "gauge", "Largest fragmentation of the job's allocators (0 to 1).",
          [&](std::size_t i) { return number(jobs[i].second.fragmentation); });
  per_job("memtrain_job_ooms_total", "counter", "Out-of-memory errors of the job.",
          [&](std::size_t i) { return std::to_string(jobs[i].second.num_ooms); });
  per_job("memtrain_job_releases_total", "counter", "Times the job released cached memory for another job.",
          [&](std::size_t i) { return std::to_string(e[i].releases); });
  per_job("memtrain_job_released_bytes_total", "counter", "Bytes the job released for other jobs.",
          [&](std::size_t i) { return std::to_string(e[i].released_bytes); });
  return os.str();
}

}  // namespace memtrain::memory
