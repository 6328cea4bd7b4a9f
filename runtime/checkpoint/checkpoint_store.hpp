#pragma once
// The checkpoints of a run on disk: run_dir/checkpoints/step-NNNNNNNN/, written so that a crash
// at any byte leaves every earlier checkpoint loadable (docs/checkpoints.md).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/checkpoint/durable_file.hpp"

namespace memtrain::checkpoint {

// Note [A checkpoint appears whole or not at all]
// A checkpoint is written into step-NNNNNNNN.tmp/, each file fsynced as it is written. Only
// then are meta.json (the file sizes) and manifest.json (XXH64 of every file) written, the
// directory fsynced, renamed to step-NNNNNNNN/ and the parent fsynced, and last `latest` is
// replaced atomically. A crash before the rename leaves a .tmp directory nobody loads (the next
// checkpoint removes it); after it, a complete directory. Bytes that rot later, or a disk that
// lied about a sync, are caught by the manifest at load, and the previous checkpoint is used.
// Older checkpoints are removed (keep_last) only after the new one is complete, so there is
// never a moment without a complete checkpoint once the first one exists.

// "step-00000012".
std::string step_directory_name(std::int64_t step);
// The step of a complete checkpoint's directory name; nullopt for anything else (.tmp too).
std::optional<std::int64_t> parse_step_directory_name(const std::string& name);

// Complete checkpoint directories under `root` (run_dir/checkpoints), newest step first.
struct StoredCheckpoint {
  std::int64_t step = 0;
  std::string path;
};
std::vector<StoredCheckpoint> list_checkpoints(const std::string& root);

// Creates root/step-NNNNNNNN.tmp/ (and root), removing every leftover *.tmp of a crashed
// write first, and returns its path. Called by one process (rank 0) before the others write
// their files into it. Throws memtrain::RuntimeError when a directory cannot be created.
std::string begin_checkpoint(const std::string& root, std::int64_t step);

// Completes the checkpoint begun for `step` once every process has written its files: adds
// "files" (name -> bytes) to `meta` and writes it as meta.json, writes manifest.json, fsyncs,
// renames the directory into place (replacing an invalid one of the same step), fsyncs root,
// replaces root/latest, then removes complete checkpoints newer than `step` (the future a
// resume from an older one abandoned) and all but the `keep_last` newest older ones, keeping
// also the newest trusted one (checkpoint_trust.hpp) when those are not. Returns
// the final path. Throws memtrain::RuntimeError on any failed write, sync or rename.
std::string commit_checkpoint(const std::string& root, std::int64_t step, nlohmann::ordered_json meta, int keep_last,
                              WriteBudget* budget = nullptr);

}  // namespace memtrain::checkpoint
