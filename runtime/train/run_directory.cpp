#include "runtime/train/run_directory.hpp"

#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/core/atomic_file.hpp"
#include "runtime/core/errors.hpp"

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

// The config_hash recorded in dir/run.json; empty when there is no readable run.json.
std::string recorded_hash(const fs::path& dir) {
  std::ifstream in(dir / "run.json");
  if (!in) return {};
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("config_hash") || !j["config_hash"].is_string()) return {};
  return j["config_hash"].get<std::string>();
}

}  // namespace

std::string RunDirectory::default_path(const std::string& config_name,
                                       std::chrono::system_clock::time_point now) {
  const std::time_t tt = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  localtime_r(&tt, &tm);
  std::ostringstream os;
  os << "runs/" << config_name << '-' << std::put_time(&tm, "%Y%m%d-%H%M%S");
  return os.str();
}

RunDirectory RunDirectory::open(const std::string& path, const std::string& config_hash,
                                const std::string& config_yaml, const std::string& config_name,
                                const std::string& config_path, int world_size) {
  const fs::path dir(path);
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) {
      throw ConfigError("run directory " + path + " exists and is not a directory; expected a "
                        "new or existing run directory (--run-dir)");
    }
    if (!fs::is_empty(dir, ec)) {
      const std::string previous = recorded_hash(dir);
      if (previous.empty() && fs::exists(dir / "run.json", ec)) {
        // Damaged or hand-edited: the directory is a run, and "has no run.json" would send the
        // user looking for a file that is there.
        throw ConfigError("run directory " + path + ": run.json is unreadable or not a JSON object with a "
                          "config_hash string; refusing to write into it: expected the run.json memtrain "
                          "wrote, or another --run-dir");
      }
      if (previous.empty()) {
        throw ConfigError("run directory " + path + " is not empty and has no run.json; "
                          "refusing to write into it: expected a new directory or one written "
                          "by the same config (--run-dir)");
      }
      if (previous != config_hash) {
        throw ConfigError("run directory " + path + " was written by a different config "
                          "(config_hash " + previous + ", this config " + config_hash +
                          "); refusing to overwrite it: choose another --run-dir");
      }
      return RunDirectory(path, /*reused=*/true);
    }
  }
  fs::create_directories(dir, ec);
  if (ec) throw RuntimeError("cannot create run directory " + path + ": " + ec.message());

  // Temporary name and rename: a crash never leaves a half-written config.yaml or run.json.
  core::write_file_atomically((dir / "config.yaml").string(),
                              [&](std::ostream& out) { out << config_yaml; });
  nlohmann::ordered_json run;
  run["config_hash"] = config_hash;
  run["config_name"] = config_name;
  run["config_path"] = config_path;
  run["created_at"] = iso_time(std::chrono::system_clock::now());
  run["world_size"] = world_size;
  core::write_file_atomically((dir / "run.json").string(),
                              [&](std::ostream& out) { out << run.dump(2) << '\n'; });
  return RunDirectory(path, /*reused=*/false);
}

std::string RunDirectory::file(const std::string& name) const {
  return (fs::path(path_) / name).string();
}

}  // namespace memtrain::train
