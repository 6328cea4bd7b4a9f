#include "runtime/config/workload_file.hpp"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "memory/byte_size.hpp"
#include "memory/memory_stats.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/printable.hpp"

namespace memtrain::train {
namespace {

constexpr const char* kJobKeys = "name, trace, start, steps, repeat, gap";

std::string at(const std::string& path, const YAML::Mark& mark) {
  return printable(path) + ":" + std::to_string(mark.line + 1);
}

[[noreturn]] void fail(const std::string& path, const YAML::Node& node, const std::string& what) {
  throw ConfigError(at(path, node.Mark()) + ": " + what);
}

std::string read_text(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (!fs::exists(status)) throw ConfigError(printable(path) + ": workload file not found; expected a YAML file");
  if (!fs::is_regular_file(status)) {
    throw ConfigError(printable(path) + ": is not a regular file; expected a YAML workload file");
  }
  std::ifstream in(path);
  if (!in) throw ConfigError(printable(path) + ": cannot read the workload file");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string key_of(const std::string& path, const YAML::Node& key) {
  if (!key.IsScalar()) fail(path, key, "a key that is not a text; expected a name such as jobs or trace");
  return key.Scalar();
}

std::uint64_t count(const std::string& path, const std::string& key, const YAML::Node& value, std::uint64_t least) {
  const std::string text = value.IsScalar() ? value.Scalar() : std::string();
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (!value.IsScalar() || text.empty() || ec != std::errc() || end != text.data() + text.size() || n < least) {
    fail(path, value,
         key + " = " + printable(value.IsScalar() ? text : std::string("(not a number)"), 40) +
             ": expected an integer " + (least == 0 ? "of 0 or more" : "of " + std::to_string(least) + " or more") +
             (key == "steps" || key == "start" || key == "gap" ? " (steps of the common clock)" : ""));
  }
  return n;
}

WorkloadJob read_job(const std::string& path, const YAML::Node& entry, std::size_t index) {
  WorkloadJob job;
  job.line = entry.Mark().line + 1;
  if (!entry.IsMap()) fail(path, entry, "job " + std::to_string(index + 1) + " is not a mapping; expected " + kJobKeys);
  std::set<std::string> seen;
  YAML::Node trace_node;
  bool has_trace = false;
  for (const auto& kv : entry) {
    const std::string key = key_of(path, kv.first);
    if (!seen.insert(key).second) fail(path, kv.first, key + ": given twice in one job; expected each key once");
    const YAML::Node& v = kv.second;
    if (key == "name") {
      if (!v.IsScalar() || v.Scalar().empty()) fail(path, v, "name: expected a non-empty text");
      job.name = v.Scalar();
    } else if (key == "trace") {
      if (!v.IsScalar() || v.Scalar().empty()) fail(path, v, "trace: expected the path of a trace file");
      trace_node = v;
      has_trace = true;
    } else if (key == "start") {
      job.start = count(path, key, v, 0);
    } else if (key == "steps") {
      job.steps = count(path, key, v, 1);
    } else if (key == "repeat") {
      job.repeat = count(path, key, v, 1);
    } else if (key == "gap") {
      job.gap = count(path, key, v, 0);
    } else {
      fail(path, kv.first, printable(key, 40) + ": unknown key of a job; expected " + kJobKeys);
    }
  }
  if (!has_trace) fail(path, entry, "job " + std::to_string(index + 1) + " has no trace; expected trace: FILE");
  // A trace is named relative to the workload file, so a workload and its traces move together.
  namespace fs = std::filesystem;
  const fs::path given = trace_node.Scalar();
  job.trace = given.is_absolute() ? given.string() : (fs::path(path).parent_path() / given).string();
  std::error_code ec;
  if (!fs::is_regular_file(job.trace, ec)) {
    fail(path, trace_node,
         "trace " + printable(job.trace, 120) +
             (fs::exists(job.trace, ec) ? " is not a regular file" : " does not exist") +
             "; expected a trace CSV (op,id,bytes,stream,tag) or RMM's log, named relative to the workload file");
  }
  if (job.name.empty()) job.name = given.stem().string();
  return job;
}

}  // namespace

Workload load_workload(const std::string& path) {
  Workload w;
  w.path = path;
  YAML::Node root;
  try {
    root = YAML::Load(read_text(path));
  } catch (const YAML::Exception& e) {
    throw ConfigError(at(path, e.mark) + ": not valid YAML (" + printable(e.msg) +
                      "); expected a mapping with jobs (and optionally capacity)");
  }
  if (!root.IsMap()) {
    throw ConfigError((root.IsNull() ? printable(path) : at(path, root.Mark())) +
                      ": expected a YAML mapping with jobs (and optionally capacity)");
  }
  std::set<std::string> seen;
  YAML::Node jobs;
  bool has_jobs = false;
  for (const auto& kv : root) {
    const std::string key = key_of(path, kv.first);
    if (!seen.insert(key).second) fail(path, kv.first, key + ": given twice; expected each key once");
    if (key == "jobs") {
      jobs = kv.second;
      has_jobs = true;
    } else if (key == "capacity") {
      const YAML::Node& v = kv.second;
      std::size_t bytes = 0;
      try {
        if (!v.IsScalar()) throw std::invalid_argument("not a size");
        bytes = memory::parse_byte_size(v.Scalar());
      } catch (const std::invalid_argument&) {
        fail(path, v,
             "capacity = " + printable(v.IsScalar() ? v.Scalar() : "(not a size)", 40) +
                 ": expected a device size such as 80GB or 40GiB");
      }
      if (bytes == 0) fail(path, v, "capacity is zero; expected a device size such as 80GB or 40GiB");
      // The allocators' statistics are signed 64-bit counters (as --capacity says).
      if (bytes > memory::kLargestAllocatorBytes) {
        fail(path, v,
             "capacity " + printable(v.Scalar(), 40) + " is larger than 4 EiB, the most the allocators count; " +
                 "expected a device size such as 80GB");
      }
      w.capacity_bytes = bytes;
    } else {
      fail(path, kv.first, printable(key, 40) + ": unknown key; expected jobs or capacity");
    }
  }
  if (!has_jobs || !jobs.IsSequence() || jobs.size() == 0) {
    fail(path, has_jobs ? jobs : root, "jobs: expected a non-empty list of jobs, each with trace: FILE");
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    WorkloadJob job = read_job(path, jobs[i], i);
    if (!names.insert(job.name).second) {
      fail(path, jobs[i], "a second job named " + printable(job.name, 60) + "; expected a name per job");
    }
    w.jobs.push_back(std::move(job));
  }
  return w;
}

}  // namespace memtrain::train
