// memtrain checkpoint verify DIR | inspect DIR: checking and describing a checkpoint directory
// (run_dir/checkpoints/step-NNNNNNNN) without loading it into a model.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/checkpoint/checkpoint_trust.hpp"
#include "runtime/checkpoint/checkpoint_store.hpp"
#include "runtime/checkpoint/checkpoint_verify.hpp"
#include "runtime/cli/checkpoint_directory.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/safetensors.hpp"
#include "runtime/train/checkpoint_loadable.hpp"

namespace memtrain::cli {
namespace {

namespace fs = std::filesystem;

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// verify_checkpoint (every file against manifest.json), and when the files are intact,
// what a load needs (train::verify_loadable, Note [A checkpoint that verifies must load]): a
// hand-edited meta.json with its checksum recomputed, a tensor renamed or reshaped, used to
// verify as valid and then stop the resume with exit 1.
checkpoint::VerifyReport verified_for_load(const std::string& dir) {
  checkpoint::VerifyReport report = checkpoint::verify_checkpoint(dir);
  if (!report.ok()) return report;
  report.problems = train::verify_loadable(dir);
  return report;
}

int inspect(const std::string& dir, std::ostream& out) {
  const checkpoint::VerifyReport report = verified_for_load(dir);
  std::ifstream meta_in(fs::path(dir) / "meta.json");
  const auto meta = nlohmann::json::parse(meta_in, nullptr, /*allow_exceptions=*/false);
  out << "checkpoint " << dir << ": " << (report.ok() ? "valid" : "NOT VALID") << "\n";
  if (meta.is_object()) {
    for (const char* key : {"step", "consumed_samples", "dtype", "bf16_gemm", "tensor_model_parallel_size",
                            "data_parallel_size", "zero_stage", "config_hash", "data_key", "memtrain_version"}) {
      // A hand-edited meta.json may hold bytes that are not UTF-8: shown replaced, not thrown on.
      if (meta.contains(key)) {
        out << "  " << key << ": " << meta[key].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      }
    }
  }
  // Note [A checkpoint is trusted once a health check has passed]
  const checkpoint::Trust trust = checkpoint::read_trust(dir);
  out << "  trusted: " << (trust.trusted ? "yes" : "no") << " ("
      << (trust.how == "no"         ? "no health check has passed at or after its step; resume and rollback pass it by"
          : trust.how == "at write" ? "its step's health checks passed before it was written"
          : trust.how == "not recorded" ? "written before trust was recorded"
                                        : trust.how)
      << ")\n";
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::error_code ec;
    const auto bytes = fs::file_size(fs::path(dir) / f, ec);
    if (ec) {  // a directory or a dangling link: the report below names it too
      out << "  file " << f << ": " << ec.message() << "\n";
      continue;
    }
    out << "  file " << f << ": " << bytes << " bytes\n";
    if (!f.ends_with(".safetensors")) continue;
    try {
      for (const auto& [name, a] : core::read_safetensors((fs::path(dir) / f).string())) {
        out << "    " << name << " " << a.dtype << " " << shape_text(a.shape) << "\n";
      }
    } catch (const std::exception& e) {
      out << "    unreadable: " << e.what() << "\n";
    }
  }
  for (const auto& p : report.problems) out << "  problem: " << p << "\n";
  for (const auto& n : report.notes) out << "  note: " << n << "\n";
  return report.ok() ? 0 : 1;
}

}  // namespace

void add_checkpoint_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("checkpoint", "Check or describe a checkpoint directory");
  cmd->require_subcommand(1);
  auto dir = std::make_shared<std::string>();

  CLI::App* verify = cmd->add_subcommand(
      "verify", "Check every file against manifest.json and what a load needs (exit 0 valid, 1 not valid)");
  verify->add_option("dir", *dir, "Checkpoint directory (run_dir/checkpoints/step-NNNNNNNN)")->required();
  verify->callback([dir, &exit_code] {
    require_checkpoint_directory(*dir);
    const checkpoint::VerifyReport report = verified_for_load(*dir);
    if (report.ok()) {
      std::cout << "checkpoint " << *dir << ": valid\n";
    } else {
      // Damaged bytes say "(corrupted)" in their line; other problems (a meta.json that
      // disagrees with the files, a file that cannot be read) are not corruption.
      std::cout << "checkpoint " << *dir << ": not valid (a resume skips it)\n";
      for (const auto& p : report.problems) std::cout << "  " << *dir << "/" << p << "\n";
    }
    // Files that are not part of the checkpoint (not in the manifest): said, not held against it.
    for (const auto& n : report.notes) std::cout << "  note: " << *dir << "/" << n << "\n";
    exit_code = report.ok() ? 0 : 1;
  });

  CLI::App* inspect_cmd =
      cmd->add_subcommand("inspect", "Print step, layout, files and every tensor's name, dtype and shape");
  inspect_cmd->add_option("dir", *dir, "Checkpoint directory (run_dir/checkpoints/step-NNNNNNNN)")->required();
  inspect_cmd->callback([dir, &exit_code] {
    require_checkpoint_directory(*dir);
    exit_code = inspect(*dir, std::cout);
  });
}

}  // namespace memtrain::cli
