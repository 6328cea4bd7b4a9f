#include "runtime/train/resume.hpp"

#include <filesystem>
#include <limits>
#include <fstream>
#include <sstream>
#include <vector>

#include "runtime/checkpoint/checkpoint_store.hpp"
#include "runtime/checkpoint/checkpoint_trust.hpp"
#include "runtime/checkpoint/checkpoint_verify.hpp"
#include "runtime/config/resume_compatibility.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/train/checkpoint_loadable.hpp"
#include "runtime/train/checkpoint_loader.hpp"

namespace memtrain::train {
namespace {

namespace fs = std::filesystem;

std::string read_text(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw RuntimeError(file + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

ResumeMode parse_resume_mode(const std::string& text) {
  if (text == "auto") return ResumeMode::automatic;
  if (text == "required") return ResumeMode::required;
  if (text == "never") return ResumeMode::never;
  throw ConfigError("--resume " + text + ": expected auto, required or never");
}

ResumePoint find_resume_point(const std::string& run_dir, ResumeMode mode, const Config& config,
                              std::ostream& warnings) {
  const std::string root = (fs::path(run_dir) / "checkpoints").string();
  std::error_code ec;
  const auto stored =
      fs::is_directory(root, ec) ? checkpoint::list_checkpoints(root) : std::vector<checkpoint::StoredCheckpoint>{};
  if (stored.empty()) {
    if (mode == ResumeMode::required) {
      throw ConfigError("--resume required: run directory " + run_dir + " has no checkpoints");
    }
    return {};
  }
  if (mode == ResumeMode::never) {
    throw ConfigError("--resume never: run directory " + run_dir + " has checkpoints (the newest of step " +
                      std::to_string(stored.front().step) +
                      "), which starting over would overwrite; resume (--resume auto) or use another --run-dir");
  }
  std::vector<std::string> skipped;
  // Note [A checkpoint is trusted once a health check has passed]: never a newer untrusted one;
  // Note [A checkpoint that verifies must load]: never one that would fail to load.
  const auto valid = checkpoint::newest_trusted_checkpoint(
      root, std::numeric_limits<std::int64_t>::max(), &skipped,
      [](const checkpoint::StoredCheckpoint& c) { return verify_loadable(c.path); });
  for (const auto& w : skipped) warnings << "memtrain: warning: " << w << "\n";
  if (!valid) {
    if (mode == ResumeMode::required) {
      throw ConfigError("--resume required: no checkpoint under " + root +
                        " verifies, is trusted and loads (the warnings say why)");
    }
    warnings << "memtrain: warning: no checkpoint under " << root
             << " verifies, is trusted and loads; starting from step 0 (--resume required would refuse)\n";
    ResumePoint fresh;
    fresh.none_valid = true;
    return fresh;
  }
  const CheckpointMeta meta = read_checkpoint_meta(valid->path);
  const std::string saved_yaml = read_text((fs::path(valid->path) / "config.yaml").string());
  const auto conflicts = resume_conflicts(saved_yaml, meta.lr_decay_steps, config);
  if (!conflicts.empty()) {
    std::string message = "cannot resume from checkpoint " + valid->path +
                          ": the config differs in what changes the training trajectory:";
    for (const auto& c : conflicts) {
      message += "\n  ";
      message += c;
    }
    message +=
        "\n(docs/config.md, \"Resuming\", lists the keys a resume may change; use another --run-dir to start a new "
        "run)";
    throw ConfigError(message);
  }
  ResumePoint point;
  point.resume = true;
  point.checkpoint = valid->path;
  point.step = meta.step;
  point.data_parallel_size = meta.data_parallel_size;
  point.bf16_gemm = meta.bf16_gemm;
  point.pool = meta.pool;
  return point;
}

}  // namespace memtrain::train
