#pragma once
// Checking a checkpoint against its manifest, and choosing the one a resume loads.
#include <optional>
#include <string>
#include <vector>

#include "runtime/checkpoint/checkpoint_store.hpp"

namespace memtrain::checkpoint {

struct VerifyReport {
  // One line per problem, "<file>: <what>" (missing, size, checksum, unreadable manifest).
  std::vector<std::string> problems;
  bool ok() const { return problems.empty(); }
};

// Checks that `dir` has a readable manifest.json and meta.json, and that every file the
// manifest names exists with its recorded size and XXH64, and that no file is unlisted.
// Reads every byte; throws nothing (what fails is reported).
VerifyReport verify_checkpoint(const std::string& dir);

// The newest complete checkpoint under `root` that verifies. Each newer one that fails is
// skipped with a warning "skipping checkpoint <dir>: <problem>" appended to *warnings.
std::optional<StoredCheckpoint> newest_valid_checkpoint(const std::string& root, std::vector<std::string>* warnings);

}  // namespace memtrain::checkpoint
