#include "runtime/cli/checkpoint_directory.hpp"

#include <filesystem>

#include "runtime/checkpoint/checkpoint_store.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::cli {

namespace fs = std::filesystem;

std::string missing_directory_reason(const std::string& path) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(path, ec)) ? ": not a directory" : ": no such directory";
}

void require_checkpoint_directory(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw ConfigError("checkpoint " + dir + missing_directory_reason(dir) +
                      "; expected a checkpoint directory "
                      "such as runs/<name>/checkpoints/step-00000100");
  }
  // A checkpoint missing one of the two is corrupt (exit 1); missing both, the path is the
  // mistake, most often a run directory or its checkpoints folder given for a checkpoint.
  if (fs::exists(fs::path(dir) / "manifest.json", ec) || fs::exists(fs::path(dir) / "meta.json", ec)) return;
  for (const fs::path& root : {fs::path(dir) / "checkpoints", fs::path(dir)}) {
    const auto stored = checkpoint::list_checkpoints(root.string());
    if (!stored.empty()) {
      throw ConfigError("checkpoint " + dir +
                        ": not a checkpoint directory (no manifest.json or meta.json); "
                        "expected one of its checkpoints, such as " +
                        stored.front().path);
    }
  }
  throw ConfigError("checkpoint " + dir +
                    ": not a checkpoint directory (no manifest.json or meta.json); "
                    "expected a checkpoint directory such as runs/<name>/checkpoints/step-00000100");
}

}  // namespace memtrain::cli
