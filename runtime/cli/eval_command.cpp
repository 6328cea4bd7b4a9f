// memtrain eval --checkpoint DIR [--input FILE.json]: exactly one JSON object on stdout,
// messages on stderr (checkpoint_eval.hpp).
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "runtime/cli/checkpoint_directory.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/json_text.hpp"
#include "runtime/train/checkpoint_eval.hpp"

namespace memtrain::cli {

namespace {
struct EvalArgs {
  std::string checkpoint, input;
};
}  // namespace

void add_eval_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* cmd =
      app.add_subcommand("eval", "Evaluate a checkpoint on token ids or on its validation split (JSON on stdout)");
  cmd->add_option("--checkpoint", args->checkpoint, "Checkpoint directory")->required();
  cmd->add_option("--input", args->input,
                  "JSON file {\"input_ids\": [[...]], \"labels\": [[...]]} (-100 = not scored; optional "
                  "attention_mask, token_type_ids); default: the validation split");
  cmd->callback([args, &exit_code] {
    std::error_code ec;
    if (!std::filesystem::is_directory(args->checkpoint, ec)) {
      throw ConfigError("eval --checkpoint " + args->checkpoint + missing_directory_reason(args->checkpoint) +
                        "; expected a checkpoint "
                        "directory such as runs/<name>/checkpoints/step-00000100");
    }
    require_checkpoint_directory(args->checkpoint);  // a run directory given for a checkpoint: exit 2
    nlohmann::ordered_json j;
    if (!args->input.empty()) {
      const train::EvalInput input = train::parse_eval_input(args->input);
      const train::TokenEval e = train::evaluate_tokens(args->checkpoint, input, std::cerr);
      j["checkpoint"] = args->checkpoint;
      j["step"] = e.step;
      j["loss"] = e.loss;
      j["labelled_positions"] = e.argmax.size();
      j["argmax"] = e.argmax;
    } else {
      std::int64_t step = 0;
      const train::EvalResult e = train::evaluate_checkpoint(args->checkpoint, &step, std::cerr);
      j["checkpoint"] = args->checkpoint;
      j["step"] = step;
      j["loss"] = e.loss;
      j["accuracy"] = e.accuracy;
      j["perplexity"] = e.perplexity;
    }
    std::cout << core::json_text(j) << "\n" << std::flush;
    exit_code = 0;
  });
}

}  // namespace memtrain::cli
