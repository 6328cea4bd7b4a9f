#pragma once
// The path a user gives as a checkpoint (checkpoint verify/inspect, eval, export-hf).
#include <string>

namespace memtrain::cli {

// Throws ConfigError (exit 2) when `dir` is not a directory, or holds neither manifest.json nor
// meta.json: the path is then the mistake (most often a run directory or its checkpoints
// folder), and the message names one of the checkpoints under it when there is one. A
// directory with one of the two files is a checkpoint, corrupt or not (verification says which).
void require_checkpoint_directory(const std::string& dir);

// ": no such directory" when nothing is at `path` (a mistyped step), ": not a directory" when
// something else is: the start of the message a missing checkpoint path gets.
std::string missing_directory_reason(const std::string& path);

}  // namespace memtrain::cli
