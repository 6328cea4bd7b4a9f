#pragma once
// manifest.json of a checkpoint: the size and XXH64 of every file in it, so that a truncated or
// corrupted checkpoint is recognised before anything is loaded from it.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace memtrain::checkpoint {

struct FileDigest {
  std::uint64_t bytes = 0;
  std::string xxh64;  // 16 lower-case hex digits (data::hex64 of data::xxh64_file)
};

// File name (relative to the checkpoint directory) -> digest.
using Manifest = std::map<std::string, FileDigest>;

// The digests of `files` in `dir`. Throws memtrain::RuntimeError when one cannot be read.
Manifest compute_manifest(const std::string& dir, const std::vector<std::string>& files);

// {"format": "memtrain-checkpoint-manifest", "version": 1, "files": {name: {bytes, xxh64}}}.
std::string manifest_json(const Manifest& manifest);

// Parses manifest_json's text. Throws memtrain::RuntimeError "<what>" when it is not JSON or
// lacks a field (the caller adds the file's path).
Manifest parse_manifest(const std::string& text);

}  // namespace memtrain::checkpoint
