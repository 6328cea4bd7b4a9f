#pragma once
// Checking a checkpoint against its manifest, and choosing the one a resume loads.
#include <optional>
#include <string>
#include <vector>

#include "runtime/checkpoint/checkpoint_store.hpp"

namespace memtrain::checkpoint {

struct VerifyReport {
  // One line per problem, "<file>: <what>" (missing, size, checksum, unreadable with the OS's
  // reason, unreadable manifest): the checkpoint cannot be loaded.
  std::vector<std::string> problems;
  // One line per thing worth saying that does not stop a load, "<file>: <what>": an entry of
  // the directory that is not part of the checkpoint (not in the manifest, so nothing reads it).
  std::vector<std::string> notes;
  bool ok() const { return problems.empty(); }
};

// Checks that `dir` has a readable manifest.json and meta.json, and that every file the
// manifest names exists with its recorded size and XXH64. An entry of the directory that the
// manifest does not name (a copy left by a user, an editor's backup) is not read by a load: it
// is a note, not a problem (trusted.json, written by a later health check, not even that).
// Reads every byte; throws nothing (what fails is reported).
VerifyReport verify_checkpoint(const std::string& dir);

// The newest complete checkpoint under `root` that verifies. Each newer one that fails is
// skipped with a warning "skipping checkpoint <dir>: <problem>" appended to *warnings.
std::optional<StoredCheckpoint> newest_valid_checkpoint(const std::string& root, std::vector<std::string>* warnings);

}  // namespace memtrain::checkpoint
