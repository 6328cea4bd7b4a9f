#pragma once
// The directory one training run writes into: config.yaml, run.json, metrics.jsonl,
// memory_snapshot.json (design.md, "Outputs of a run").
#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "runtime/train/run_directory_lock.hpp"

namespace memtrain::train {

// Note [A run directory belongs to one config]
// metrics.jsonl of two different experiments interleaved in one file cannot be told apart, and
// a later run must never silently replace the results of an earlier one. A run directory
// records the hash of the trajectory of the config that created it (run.json: trajectory_hash,
// runtime/config/resume_compatibility.hpp: the keys a resume may not change); opening it again
// is allowed only with the same trajectory (its metrics.jsonl is then appended to, never
// truncated).
// A directory with another config's hash, or a non-empty directory that is not a run directory
// at all, is refused with a ConfigError before anything is written.
class RunDirectory {
 public:
  // runs/<config_name>-<YYYYmmdd-HHMMSS> (local time), relative to the working directory.
  static std::string default_path(const std::string& config_name, std::chrono::system_clock::time_point now);

  // Creates `path` (with parents) and writes config.yaml (`config_yaml`) and run.json
  // ({trajectory_hash, config_name, config_path, created_at, world_size}), or reuses it when it
  // was created with the same `trajectory_hash` (read from the key config_hash in run
  // directories written before 2026-12-05), rewriting both for this start (created_at kept,
  // last_started_at added: a resume may change max_steps or the rank count).
  // The directory is locked for as long as the RunDirectory lives (Note [One job per run
  // directory]): `held` is the lock a caller took before reading the directory (its
  // checkpoints); without one, open() takes it right after creating or finding the directory,
  // before anything is read or written. A directory holding only the lock file counts as empty.
  // `seen_new`: the caller found no directory at `path` when it looked for checkpoints, so a
  // directory another job has written since is refused rather than reused (ConfigError).
  // Throws ConfigError: `path` is a file; its run.json names another trajectory_hash (both
  // hashes in the message); it is non-empty without a readable run.json; another job holds its
  // lock (RunDirectoryLock::acquire). Throws RuntimeError when a file cannot be written.
  static RunDirectory open(const std::string& path, const std::string& trajectory_hash, const std::string& config_yaml,
                           const std::string& config_name, const std::string& config_path, int world_size,
                           std::optional<RunDirectoryLock> held = std::nullopt, bool seen_new = false);

  // True when `path` is a directory that open() would lock rather than refuse: empty, holding
  // only the lock file, or holding a run.json. A caller locks such a directory
  // (RunDirectoryLock::acquire) before it reads the directory's checkpoints, and hands the lock
  // to open().
  static bool is_lockable(const std::string& path);

  const std::string& path() const { return path_; }
  // path()/name
  std::string file(const std::string& name) const;
  // True when open() found the directory from an earlier run of the same config.
  bool reused() const { return reused_; }
  // Sets run.json's `key` to the JSON value `json_value` (written atomically), e.g. the memory
  // pool's record at the end of a run. Throws RuntimeError when run.json cannot be read or
  // written, nlohmann::json::parse_error for a json_value that is not JSON.
  void record(const std::string& key, const std::string& json_value) const;

 private:
  RunDirectory(std::string path, bool reused, RunDirectoryLock lock)
      : path_(std::move(path)), reused_(reused), lock_(std::move(lock)) {}
  std::string path_;
  bool reused_ = false;
  RunDirectoryLock lock_;
};

}  // namespace memtrain::train
