#include "runtime/train/run_directory.hpp"

#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/core/atomic_file.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/json_text.hpp"

namespace memtrain::train {
namespace fs = std::filesystem;

namespace {

std::string iso_time(std::chrono::system_clock::time_point t) {
  const std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  localtime_r(&tt, &tm);
  std::ostringstream os;
  os << std::put_time(&tm, "%Y-%m-%dT%H:%M:%S%z");
  return os.str();
}

// The trajectory_hash recorded in dir/run.json; empty when there is no readable run.json. Run
// directories written before 2026-12-05 hold the same hash under the key config_hash.
std::string recorded_hash(const fs::path& dir) {
  std::ifstream in(dir / "run.json");
  if (!in) return {};
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return {};
  for (const char* key : {"trajectory_hash", "config_hash"}) {
    if (j.contains(key)) return j[key].is_string() ? j[key].get<std::string>() : std::string();
  }
  return {};
}

// config.yaml and run.json of a start; created_at kept from the first start when given.
void write_description(const fs::path& dir, const std::string& trajectory_hash, const std::string& config_yaml,
                       const std::string& config_name, const std::string& config_path, int world_size,
                       const std::string& created_at) {
  // Temporary name and rename: a crash never leaves a half-written config.yaml or run.json.
  core::write_file_atomically((dir / "config.yaml").string(), [&](std::ostream& out) { out << config_yaml; });
  const std::string now = iso_time(std::chrono::system_clock::now());
  nlohmann::ordered_json run;
  run["trajectory_hash"] = trajectory_hash;
  run["config_name"] = config_name;
  run["config_path"] = config_path;
  run["created_at"] = created_at.empty() ? now : created_at;
  if (!created_at.empty()) run["last_started_at"] = now;
  run["world_size"] = world_size;
  core::write_file_atomically((dir / "run.json").string(),
                              [&](std::ostream& out) { out << core::json_text(run, 2) << '\n'; });
}

// True for an empty directory or one holding only the lock file (Note [One job per run
// directory]): a new run directory, or one whose first start stopped before run.json.
bool holds_only_the_lock(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename() != kRunDirectoryLockFile) return false;
  }
  return true;
}

}  // namespace

std::string RunDirectory::default_path(const std::string& config_name, std::chrono::system_clock::time_point now) {
  const std::time_t tt = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  localtime_r(&tt, &tm);
  std::ostringstream os;
  os << "runs/" << config_name << '-' << std::put_time(&tm, "%Y%m%d-%H%M%S");
  return os.str();
}

RunDirectory RunDirectory::open(const std::string& path, const std::string& trajectory_hash,
                                const std::string& config_yaml, const std::string& config_name,
                                const std::string& config_path, int world_size, std::optional<RunDirectoryLock> held,
                                bool seen_new) {
  const fs::path dir(path);
  std::error_code ec;
  // Another job created and wrote the directory between this one's first look (its resume
  // point, taken without a lock because there was nothing to lock) and now: reusing it would
  // log every step a second time into that job's metrics.jsonl (Note [One job per run
  // directory]).
  const auto refuse_raced = [&] {
    throw ConfigError("run directory " + path +
                      " was created by another job while this one was starting; "
                      "expected one job per run directory: start this one again to resume that run, or choose "
                      "another --run-dir");
  };
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) {
      throw ConfigError("run directory " + path +
                        " exists and is not a directory; expected a "
                        "new or existing run directory (--run-dir)");
    }
    const auto refuse_foreign = [&] {
      throw ConfigError("run directory " + path +
                        " is not empty and has no run.json; "
                        "refusing to write into it: expected a new directory or one written "
                        "by the same config (--run-dir)");
    };
    // A directory that is not a run is refused before a lock file is put into it. One with a
    // lock file is a run being started (its run.json comes last): lock it, so that a job
    // starting beside it is told which job holds it, or that it raced, not that the directory
    // is foreign.
    if (!held && !holds_only_the_lock(dir) && !fs::exists(dir / "run.json", ec) &&
        !fs::exists(dir / kRunDirectoryLockFile, ec)) {
      refuse_foreign();
    }
    if (!held) held = RunDirectoryLock::acquire(path);
    if (!holds_only_the_lock(dir)) {
      if (seen_new) refuse_raced();
      const std::string previous = recorded_hash(dir);
      if (previous.empty() && fs::exists(dir / "run.json", ec)) {
        // Damaged or hand-edited: the directory is a run, and "has no run.json" would send the
        // user looking for a file that is there.
        throw ConfigError("run directory " + path +
                          ": run.json is unreadable or not a JSON object with a "
                          "trajectory_hash string; refusing to write into it: expected the run.json memtrain "
                          "wrote, or another --run-dir");
      }
      if (previous.empty()) refuse_foreign();
      if (previous != trajectory_hash) {
        throw ConfigError("run directory " + path +
                          " was written by a different config "
                          "(trajectory_hash " +
                          previous + ", this config's " + trajectory_hash +
                          "); refusing to overwrite it: choose another --run-dir");
      }
      // The same trajectory may continue with other settings (Note [What a resume may change]:
      // max_steps, the rank count, ...): config.yaml and run.json describe the latest start, and
      // a hand-edited config.yaml is replaced by the config this start validated.
      std::ifstream in(dir / "run.json");
      const auto recorded = nlohmann::ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
      const std::string created_at = recorded.contains("created_at") && recorded["created_at"].is_string()
                                         ? recorded["created_at"].get<std::string>()
                                         : std::string();
      write_description(dir, trajectory_hash, config_yaml, config_name, config_path, world_size, created_at);
      return RunDirectory(path, /*reused=*/true, std::move(*held));
    }
  }
  fs::create_directories(dir, ec);
  if (ec == std::errc::not_a_directory || ec == std::errc::file_exists) {
    // A file where a parent directory belongs: the path is wrong, not the machine.
    throw ConfigError("cannot create run directory " + path + ": " + ec.message() +
                      " (a part of the path is a file); expected a directory path (--run-dir)");
  }
  if (ec) throw RuntimeError("cannot create run directory " + path + ": " + ec.message());
  if (!held) held = RunDirectoryLock::acquire(path);
  if (!holds_only_the_lock(dir)) refuse_raced();
  write_description(dir, trajectory_hash, config_yaml, config_name, config_path, world_size, "");
  return RunDirectory(path, /*reused=*/false, std::move(*held));
}

bool RunDirectory::is_lockable(const std::string& path) {
  const fs::path dir(path);
  std::error_code ec;
  return fs::is_directory(dir, ec) && (holds_only_the_lock(dir) || fs::exists(dir / "run.json", ec));
}

std::string RunDirectory::file(const std::string& name) const { return (fs::path(path_) / name).string(); }

void RunDirectory::record(const std::string& key, const std::string& json_value) const {
  const fs::path file = fs::path(path_) / "run.json";
  std::ifstream in(file);
  if (!in.is_open()) throw RuntimeError("cannot open " + file.string() + " to record " + key);
  auto run = nlohmann::ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!run.is_object()) throw RuntimeError("cannot read " + file.string() + " to record " + key);
  run[key] = nlohmann::ordered_json::parse(json_value);
  core::write_file_atomically(file.string(), [&](std::ostream& out) { out << core::json_text(run, 2) << '\n'; });
}

}  // namespace memtrain::train
