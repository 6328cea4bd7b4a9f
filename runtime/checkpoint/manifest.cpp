#include "runtime/checkpoint/manifest.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "runtime/core/errors.hpp"
#include "runtime/data/file_hash.hpp"
#include "runtime/core/json_text.hpp"

namespace memtrain::checkpoint {

Manifest compute_manifest(const std::string& dir, const std::vector<std::string>& files) {
  Manifest m;
  for (const auto& name : files) {
    const std::string path = (std::filesystem::path(dir) / name).string();
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) throw RuntimeError("cannot read " + path + ": " + ec.message());
    m[name] = FileDigest{size, data::hex64(data::xxh64_file(path))};
  }
  return m;
}

std::string manifest_json(const Manifest& manifest) {
  nlohmann::ordered_json j;
  j["format"] = "memtrain-checkpoint-manifest";
  j["version"] = 1;
  j["files"] = nlohmann::ordered_json::object();
  for (const auto& [name, d] : manifest) j["files"][name] = {{"bytes", d.bytes}, {"xxh64", d.xxh64}};
  return core::json_text(j, 2) + "\n";
}

Manifest parse_manifest(const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw RuntimeError("not valid JSON");
  if (!j.is_object() || !j.contains("files") || !j["files"].is_object()) {
    throw RuntimeError("has no \"files\" object");
  }
  if (j.contains("version") && j["version"] != 1) {
    throw RuntimeError("has version " + j["version"].dump() + "; this memtrain reads version 1");
  }
  Manifest m;
  for (const auto& [name, d] : j["files"].items()) {
    // Files of the checkpoint directory itself: a name that leaves it would make verification
    // read (and vouch for) a file elsewhere.
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\0') != std::string::npos) {
      throw RuntimeError("entry \"" + name + "\" is not a file name inside the checkpoint directory");
    }
    if (!d.is_object() || !d.contains("bytes") || !d["bytes"].is_number_unsigned() || !d.contains("xxh64") ||
        !d["xxh64"].is_string()) {
      throw RuntimeError("entry \"" + name + "\" lacks bytes or xxh64");
    }
    m[name] = FileDigest{d["bytes"].get<std::uint64_t>(), d["xxh64"].get<std::string>()};
  }
  return m;
}

}  // namespace memtrain::checkpoint
