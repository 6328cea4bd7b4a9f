#include "runtime/checkpoint/checkpoint_store.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "runtime/checkpoint/checkpoint_trust.hpp"
#include "runtime/checkpoint/manifest.hpp"
#include "runtime/core/atomic_file.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/json_text.hpp"

namespace memtrain::checkpoint {
namespace fs = std::filesystem;

namespace {

constexpr const char* kPrefix = "step-";
constexpr const char* kTmpSuffix = ".tmp";

void write_text_durably(const fs::path& path, const std::string& text, WriteBudget* budget) {
  write_file_durably(path.string(),
                     std::span<const std::byte>(reinterpret_cast<const std::byte*>(text.data()), text.size()), budget);
}

void remove_all_or_throw(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
  if (ec) throw RuntimeError("cannot remove " + p.string() + ": " + ec.message());
}

}  // namespace

std::string step_directory_name(std::int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "%s%08lld", kPrefix, static_cast<long long>(step));
  return name;
}

std::optional<std::int64_t> parse_step_directory_name(const std::string& name) {
  const std::string prefix = kPrefix;
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  std::int64_t step = 0;
  for (std::size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || i - prefix.size() > 17) return std::nullopt;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

std::vector<StoredCheckpoint> list_checkpoints(const std::string& root) {
  std::vector<StoredCheckpoint> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    if (!e.is_directory()) continue;
    if (auto step = parse_step_directory_name(e.path().filename().string())) {
      out.push_back({*step, e.path().string()});
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step > b.step; });
  return out;
}

std::string begin_checkpoint(const std::string& root, std::int64_t step) {
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) throw RuntimeError("cannot create " + root + ": " + ec.message());
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with(kPrefix) && name.ends_with(kTmpSuffix)) remove_all_or_throw(e.path());
  }
  const fs::path tmp = fs::path(root) / (step_directory_name(step) + kTmpSuffix);
  fs::create_directory(tmp, ec);
  if (ec) throw RuntimeError("cannot create " + tmp.string() + ": " + ec.message());
  return tmp.string();
}

std::string commit_checkpoint(const std::string& root, std::int64_t step, nlohmann::ordered_json meta, int keep_last,
                              WriteBudget* budget) {
  const fs::path tmp = fs::path(root) / (step_directory_name(step) + kTmpSuffix);
  const fs::path final_dir = fs::path(root) / step_directory_name(step);
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(tmp, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && name != "meta.json" && name != "manifest.json") files.push_back(name);
  }
  if (ec) throw RuntimeError("cannot list " + tmp.string() + ": " + ec.message());
  std::sort(files.begin(), files.end());
  nlohmann::ordered_json sizes = nlohmann::ordered_json::object();
  for (const auto& f : files) sizes[f] = fs::file_size(tmp / f);
  meta["files"] = sizes;
  write_text_durably(tmp / "meta.json", core::json_text(meta, 2) + "\n", budget);
  files.push_back("meta.json");
  std::sort(files.begin(), files.end());
  write_text_durably(tmp / "manifest.json", manifest_json(compute_manifest(tmp.string(), files)), budget);
  core::sync_path(tmp.string());

  // A directory of this step exists only if it failed verification (a resume skipped it) or
  // came from an abandoned future; this one replaces it.
  if (fs::exists(final_dir, ec)) remove_all_or_throw(final_dir);
  fs::rename(tmp, final_dir, ec);
  if (ec) throw RuntimeError("cannot rename " + tmp.string() + " to " + final_dir.string() + ": " + ec.message());
  core::sync_path(root);
  core::write_file_atomically((fs::path(root) / "latest").string(),
                              [&](std::ostream& out) { out << step_directory_name(step) << '\n'; });

  // Note [A checkpoint is trusted once a health check has passed]: the newest trusted one at or
  // before this step is kept beyond keep_last, as the one a rollback may need.
  int kept = 0;  // newest first: this step's is the first one kept
  bool trusted_kept = false;
  for (const auto& c : list_checkpoints(root)) {
    if (c.step <= step && kept < keep_last) {
      ++kept;
      trusted_kept = trusted_kept || read_trust(c.path).trusted;
      continue;
    }
    if (c.step < step && !trusted_kept && read_trust(c.path).trusted) {
      trusted_kept = true;
      continue;
    }
    remove_all_or_throw(c.path);
  }
  core::sync_path(root);
  return final_dir.string();
}

}  // namespace memtrain::checkpoint
