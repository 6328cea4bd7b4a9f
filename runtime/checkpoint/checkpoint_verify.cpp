#include "runtime/checkpoint/checkpoint_verify.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "runtime/checkpoint/checkpoint_trust.hpp"
#include "runtime/checkpoint/manifest.hpp"
#include "runtime/core/safetensors.hpp"
#include "runtime/data/file_hash.hpp"
#include "runtime/core/printable.hpp"

namespace memtrain::checkpoint {
namespace fs = std::filesystem;

VerifyReport verify_checkpoint(const std::string& dir) {
  VerifyReport r;
  const fs::path d(dir);
  std::error_code ec;
  if (!fs::is_directory(d, ec)) {
    r.problems.push_back(dir + ": not a directory");
    return r;
  }
  std::ifstream in(d / "manifest.json");
  if (!in) {
    r.problems.push_back("manifest.json: missing");
    return r;
  }
  std::stringstream text;
  text << in.rdbuf();
  Manifest m;
  try {
    m = parse_manifest(text.str());
  } catch (const std::exception& e) {
    r.problems.push_back(std::string("manifest.json: ") + json_error_text(e.what()));
    return r;
  }
  if (!m.count("meta.json")) r.problems.push_back("meta.json: not in the manifest");
  std::set<std::string> listed;
  for (const auto& [name, digest] : m) {
    listed.insert(name);
    const fs::path p = d / name;
    if (!fs::is_regular_file(p, ec)) {
      r.problems.push_back(name + ": missing");
      continue;
    }
    const auto size = fs::file_size(p, ec);
    if (ec) {
      r.problems.push_back(name + ": unreadable (" + ec.message() + ")");
      continue;
    }
    if (size != digest.bytes) {
      r.problems.push_back(name + ": " + std::to_string(size) + " bytes, the manifest records " +
                           std::to_string(digest.bytes) + " (truncated or overwritten)");
      continue;
    }
    // A file this process may not open (permissions) is named with the OS's reason: it is not
    // corrupt, but no load can read it either.
    if (const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC); fd < 0) {
      r.problems.push_back(name + ": cannot be read (" + std::strerror(errno) + ")");
      continue;
    } else {
      ::close(fd);
    }
    try {
      const std::string actual = data::hex64(data::xxh64_file(p.string()));
      if (actual != digest.xxh64) {
        r.problems.push_back(name + ": XXH64 " + actual + ", the manifest records " + digest.xxh64 + " (corrupted)");
      }
    } catch (const std::exception& e) {
      r.problems.push_back(name + ": " + e.what());
    }
  }
  for (const auto& e : fs::directory_iterator(d, ec)) {
    const std::string name = e.path().filename().string();
    // trusted.json is written after the manifest, by a later health check (checkpoint_trust.hpp).
    if (name != "manifest.json" && !name.starts_with(kTrustFile) && !listed.count(name)) {
      r.notes.push_back(name + ": not in the manifest, so not part of the checkpoint (a load never reads it)");
    }
  }
  std::sort(r.notes.begin(), r.notes.end());  // the directory's order is the file system's
  // Checksums prove the bytes are the ones written, not that they can be read: a header damaged
  // before the manifest was computed (or a manifest recomputed over damaged files) would pass
  // and then fail every load. Each tensor file's header is parsed and checked against the file.
  if (r.problems.empty()) {
    for (const auto& name : listed) {
      if (!name.ends_with(".safetensors")) continue;
      try {
        core::read_safetensors_header((d / name).string());
      } catch (const std::exception& e) {
        r.problems.push_back(name + ": unreadable: " + e.what());
      }
    }
  }
  // The manifest itself has no checksum: a file taken out of the checkpoint together with its
  // manifest entry is caught by meta.json (checksummed above), which lists every file.
  if (r.problems.empty()) {
    try {
      std::ifstream meta_in(d / "meta.json");
      const auto meta = nlohmann::json::parse(meta_in);
      if (meta.contains("files") && meta["files"].is_object()) {
        for (const auto& [name, bytes] : meta["files"].items()) {
          if (!listed.count(name)) r.problems.push_back(name + ": listed in meta.json, not in the manifest (removed?)");
        }
      }
    } catch (const std::exception& e) {
      r.problems.push_back(std::string("meta.json: ") + json_error_text(e.what()));
    }
  }
  return r;
}

std::optional<StoredCheckpoint> newest_valid_checkpoint(const std::string& root, std::vector<std::string>* warnings) {
  for (const auto& c : list_checkpoints(root)) {
    const VerifyReport r = verify_checkpoint(c.path);
    if (r.ok()) return c;
    if (warnings) {
      for (const auto& p : r.problems) warnings->push_back("skipping checkpoint " + c.path + ": " + p);
    }
  }
  return std::nullopt;
}

}  // namespace memtrain::checkpoint
