// memtrain export-hf CHECKPOINT OUT [--fp32] [--force]: a checkpoint as a Hugging Face BertForMaskedLM
// directory (checkpoint_export.hpp).
#include <filesystem>
#include <iostream>
#include <memory>

#include "runtime/checkpoint/checkpoint_verify.hpp"
#include "runtime/cli/checkpoint_directory.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/train/checkpoint_export.hpp"

namespace memtrain::cli {

namespace {
struct ExportArgs {
  std::string checkpoint, out;
  bool fp32 = false;
  bool force = false;
};
}  // namespace

void add_export_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "export-hf", "Write a checkpoint as a Hugging Face BertForMaskedLM directory (config.json, model.safetensors)");
  cmd->add_option("checkpoint", args->checkpoint, "Checkpoint directory, e.g. runs/x/checkpoints/step-00000100")
      ->required();
  // An empty OUT (an unset shell variable) is a usage error, not a failed mkdir.
  cmd->add_option("out", args->out, "Output directory (created; refused when it holds a file the export writes)")
      ->required()
      ->check(CLI::Validator(
          [](const std::string& out) { return out.empty() ? std::string("empty; expected an output directory") : ""; },
          ""));
  cmd->add_flag("--fp32", args->fp32, "Write 16-bit weights as fp32 (default: as stored)");
  cmd->add_flag("--force", args->force,
                "Replace config.json, model.safetensors, TOKENIZER.md and tokenizer.model already in OUT");
  cmd->callback([args, &exit_code] {
    std::error_code ec;
    if (!std::filesystem::is_directory(args->checkpoint, ec)) {
      throw ConfigError("export-hf: checkpoint " + args->checkpoint + missing_directory_reason(args->checkpoint) +
                        "; expected a checkpoint "
                        "directory such as runs/<name>/checkpoints/step-00000100");
    }
    // Writing into a checkpoint (or the checkpoints folder) would add files its manifest does
    // not list, and make the newest checkpoint fail verification.
    for (auto p = std::filesystem::weakly_canonical(args->out, ec); !p.empty(); p = p.parent_path()) {
      if (std::filesystem::exists(p / "manifest.json", ec) || p.filename() == "checkpoints") {
        throw ConfigError(
            "export-hf: OUT " + args->out + " lies inside " + p.string() +
            ", a checkpoint or checkpoints directory; expected a directory outside the run's checkpoints");
      }
      if (p == p.parent_path()) break;
    }
    if (std::filesystem::exists(args->out, ec) && !std::filesystem::is_directory(args->out, ec)) {
      throw ConfigError("export-hf: OUT " + args->out +
                        " exists and is not a directory; expected a new or "
                        "empty directory");
    }
    // A path through a file (OUT = notes.txt/hf) is the user's mistake, not a failure to write.
    for (auto p = std::filesystem::path(args->out).parent_path(); !p.empty(); p = p.parent_path()) {
      if (std::filesystem::exists(p, ec) && !std::filesystem::is_directory(p, ec)) {
        throw ConfigError("export-hf: OUT " + args->out + ": " + p.string() +
                          " is not a directory; expected OUT below a directory");
      }
      if (p == p.parent_path()) break;
    }
    // A second export, or a mistyped OUT, must not silently replace a model someone kept.
    std::string present;
    for (const char* name : train::kHfExportFiles) {
      if (!args->force && std::filesystem::exists(std::filesystem::path(args->out) / name, ec)) {
        present += (present.empty() ? "" : ", ") + std::string(name);
      }
    }
    // A directory where an earlier export's tokenizer.model would be replaced: not deleted, even
    // with --force.
    if (std::filesystem::symlink_status(std::filesystem::path(args->out) / "tokenizer.model", ec).type() ==
        std::filesystem::file_type::directory) {
      throw ConfigError("export-hf: " + (std::filesystem::path(args->out) / "tokenizer.model").string() +
                        " is a directory; expected the file of an earlier export, or another OUT");
    }
    if (!present.empty()) {
      throw ConfigError("export-hf: OUT " + args->out + " already holds " + present +
                        "; expected a new or empty directory, or --force to replace them");
    }
    require_checkpoint_directory(args->checkpoint);  // a run directory given for a checkpoint: exit 2
    const auto report = checkpoint::verify_checkpoint(args->checkpoint);
    if (!report.ok()) {
      std::string m = "export-hf: checkpoint " + args->checkpoint + " does not verify:";
      for (const auto& p : report.problems) m += "\n  " + p;
      throw RuntimeError(m);
    }
    train::export_hf(args->checkpoint, args->out, args->fp32);
    const bool tokenizer = std::filesystem::is_regular_file(std::filesystem::path(args->out) / "tokenizer.model", ec);
    std::cout << "memtrain: exported " << args->checkpoint << " to " << args->out
              << " (config.json, model.safetensors, TOKENIZER.md" << (tokenizer ? ", tokenizer.model" : "") << ")\n";
    exit_code = 0;
  });
}

}  // namespace memtrain::cli
