#include "runtime/cli/mpirun_hosts.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/core/atomic_file.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::cli {
namespace {

bool is_host_flag(const std::string& a) { return a == "--host" || a == "-H" || a == "-host"; }
bool is_hostfile_flag(const std::string& a) {
  return a == "--hostfile" || a == "-hostfile" || a == "--machinefile" || a == "-machinefile";
}

int parse_slots(const std::string& text, const std::string& where) {
  int v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 1) {
    throw ConfigError("memtrain supervise --exclude-host: " + where + ": slots '" + text +
                      "' is not a positive integer");
  }
  return v;
}

// `a:2,b` -> {a, 2}, {b, 1}.
std::vector<HostEntry> parse_host_list(const std::string& list) {
  std::vector<HostEntry> hosts;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const auto colon = item.find(':');
    HostEntry h{item.substr(0, colon), 1};
    if (colon != std::string::npos) h.slots = parse_slots(item.substr(colon + 1), "--host " + list);
    hosts.push_back(h);
  }
  return hosts;
}

std::string format_host_list(const std::vector<HostEntry>& hosts) {
  std::string s;
  for (const auto& h : hosts) {
    if (!s.empty()) s += ',';
    s += h.name;
    s += ':';
    s += std::to_string(h.slots);
  }
  return s;
}

bool excluded_name(const std::vector<std::string>& excluded, const std::string& name) {
  return std::find(excluded.begin(), excluded.end(), name) != excluded.end();
}

// A hostfile line's host and slots (-1 when it gives none); nullopt-like empty name for
// blank and comment lines.
HostEntry parse_hostfile_line(const std::string& line, const std::string& where) {
  std::stringstream in(line.substr(0, line.find('#')));
  HostEntry h;
  if (!(in >> h.name)) return h;
  std::string token;
  while (in >> token) {
    if (token.rfind("slots=", 0) == 0) h.slots = parse_slots(token.substr(6), where);
  }
  return h;
}

}  // namespace

HostExclusion exclude_hosts(const std::vector<std::string>& command, const std::vector<std::string>& excluded,
                            const std::string& hostfile_copy) {
  HostExclusion out;
  std::vector<std::string> seen;  // every host named, for the error message
  bool found_hosts = false;
  for (std::size_t i = 0; i < command.size(); ++i) {
    const std::string& a = command[i];
    const bool host_eq = a.rfind("--host=", 0) == 0;
    if ((is_host_flag(a) && i + 1 < command.size()) || host_eq) {
      found_hosts = true;
      const std::string list = host_eq ? a.substr(7) : command[++i];
      std::vector<HostEntry> kept;
      for (const auto& h : parse_host_list(list)) {
        seen.push_back(h.name);
        if (!excluded_name(excluded, h.name)) kept.push_back(h);
      }
      out.remaining.insert(out.remaining.end(), kept.begin(), kept.end());
      if (host_eq) {
        out.command.push_back("--host=" + format_host_list(kept));
      } else {
        out.command.push_back(a);
        out.command.push_back(format_host_list(kept));
      }
    } else if (is_hostfile_flag(a) && i + 1 < command.size()) {
      found_hosts = true;
      const std::string path = command[++i];
      std::ifstream in(path);
      if (!in) throw ConfigError("memtrain supervise --exclude-host: cannot read the hostfile " + path);
      std::string line, kept_text;
      for (int n = 1; std::getline(in, line); ++n) {
        const HostEntry h = parse_hostfile_line(line, path + ":" + std::to_string(n));
        if (!h.name.empty()) {
          seen.push_back(h.name);
          if (excluded_name(excluded, h.name)) continue;
          out.remaining.push_back(h);
        }
        kept_text += line + "\n";
      }
      // The user's own hostfile may already have the copy's name: it is never written over.
      std::string copy = hostfile_copy;
      std::error_code same_ec;
      if (!copy.empty() && std::filesystem::exists(copy) && std::filesystem::equivalent(path, copy, same_ec)) {
        copy += ".excluded";
      }
      if (!copy.empty()) {
        std::error_code ec;
        const auto parent = std::filesystem::path(copy).parent_path();
        if (!parent.empty()) std::filesystem::create_directories(parent, ec);
        core::write_file_atomically(copy, [&](std::ostream& o) { o << kept_text; });
      }
      out.command.push_back(a);
      out.command.push_back(copy);
    } else {
      out.command.push_back(a);
    }
  }
  if (!found_hosts) {
    throw ConfigError(
        "memtrain supervise --exclude-host: the command has no --host list or --hostfile to leave "
        "a host out of (expected an mpirun command line naming its hosts)");
  }
  for (const auto& name : excluded) {
    if (!excluded_name(seen, name)) {
      std::string all;
      for (const auto& h : seen) {
        if (!all.empty()) all += ", ";
        all += h;
      }
      throw ConfigError("memtrain supervise --exclude-host " + name +
                        ": no such host in the command (its hosts: " + all + ")");
    }
  }
  if (out.remaining.empty()) {
    throw ConfigError("memtrain supervise --exclude-host: no host would be left to relaunch on");
  }
  out.slots_left = 0;
  for (const auto& h : out.remaining) {
    if (h.slots < 0) {
      out.slots_left = -1;
      break;
    }
    out.slots_left += h.slots;
  }
  return out;
}

}  // namespace memtrain::cli
