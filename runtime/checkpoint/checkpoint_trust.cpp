#include "runtime/checkpoint/checkpoint_trust.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/checkpoint/checkpoint_verify.hpp"
#include "runtime/core/atomic_file.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::checkpoint {
namespace fs = std::filesystem;

Trust read_trust(const std::string& dir) {
  nlohmann::json meta;
  try {
    std::ifstream in(fs::path(dir) / "meta.json");
    if (!in) return {false, "unreadable meta.json"};
    meta = nlohmann::json::parse(in);
  } catch (const std::exception&) {
    return {false, "unreadable meta.json"};
  }
  if (!meta.is_object() || !meta.contains("trusted")) return {true, "not recorded"};
  if (meta["trusted"].is_boolean() && meta["trusted"].get<bool>()) return {true, "at write"};
  if (!meta["trusted"].is_boolean()) return {false, "meta.json \"trusted\" is not true or false"};
  const fs::path trust_file = fs::path(dir) / kTrustFile;
  std::error_code ec;
  if (!fs::exists(trust_file, ec)) return {false, "no"};
  try {
    std::ifstream in(trust_file);
    const auto t = nlohmann::json::parse(in);
    if (t.is_object() && t.contains("trusted_at_step") && t["trusted_at_step"].is_number_integer()) {
      return {true, "by step " + std::to_string(t["trusted_at_step"].get<std::int64_t>())};
    }
  } catch (const std::exception&) {}
  return {false, std::string("unreadable ") + kTrustFile};
}

void mark_trusted(const std::string& dir, std::int64_t checked_at_step) {
  const std::string text = "{\"trusted_at_step\": " + std::to_string(checked_at_step) + "}\n";
  core::write_file_atomically((fs::path(dir) / kTrustFile).string(), [&](std::ostream& out) { out << text; });
}

std::optional<StoredCheckpoint> newest_trusted_checkpoint(const std::string& root, std::int64_t max_step,
                                                          std::vector<std::string>* warnings,
                                                          const LoadCheck& load_check) {
  for (const auto& c : list_checkpoints(root)) {
    if (c.step > max_step) continue;
    const VerifyReport r = verify_checkpoint(c.path);
    if (!r.ok()) {
      if (warnings) {
        for (const auto& p : r.problems) warnings->push_back("skipping checkpoint " + c.path + ": " + p);
      }
      continue;
    }
    const Trust t = read_trust(c.path);
    if (!t.trusted) {
      if (warnings) {
        warnings->push_back("skipping checkpoint " + c.path + ": not trusted (" +
                            (t.how == "no" ? std::string("no health check passed at or after its step") : t.how) + ")");
      }
      continue;
    }
    const std::vector<std::string> problems = load_check ? load_check(c) : std::vector<std::string>{};
    if (problems.empty()) return c;
    if (warnings) {
      for (const auto& p : problems) warnings->push_back("skipping checkpoint " + c.path + ": " + p);
    }
  }
  return std::nullopt;
}

}  // namespace memtrain::checkpoint
