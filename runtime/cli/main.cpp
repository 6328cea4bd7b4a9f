// memtrain: one program, one verb per task (design.md). Exit codes: 0 done, 1 a run failed,
// 2 bad usage/config/input, 130 stopped by SIGINT (the trainer's).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>

#include "comms/communicator.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/cli/error_report.hpp"
#include "runtime/cli/usage_error_text.hpp"
#include "runtime/cli/process_environment.hpp"
#include "runtime/cli/single_process_verbs.hpp"
#include "runtime/core/printable.hpp"

#ifndef MEMTRAIN_VERSION
#define MEMTRAIN_VERSION "unknown"
#endif

int main(int argc, char** argv) {
  memtrain::cli::ensure_process_environment(argv);
  CLI::App app{"memtrain: BERT masked-LM training with a built-in memory manager"};
  app.name("memtrain");
  app.set_version_flag("--version", "memtrain " MEMTRAIN_VERSION);
  app.require_subcommand(1);
  int exit_code = 0;
  memtrain::cli::add_train_command(app, exit_code);
  memtrain::cli::add_data_command(app, exit_code);
  memtrain::cli::add_replay_command(app, exit_code);
  memtrain::cli::add_plan_command(app, exit_code);
  memtrain::cli::add_checkpoint_command(app, exit_code);
  memtrain::cli::add_eval_command(app, exit_code);
  memtrain::cli::add_export_command(app, exit_code);
  memtrain::cli::add_supervise_command(app, exit_code);
  memtrain::cli::add_top_command(app, exit_code);
  // CLI11 reports a mistyped verb as "a subcommand is required"; name it instead.
  const auto is_verb = [&](const char* word) {
    return !app.get_subcommands([word](CLI::App* sub) { return sub->get_name() == word; }).empty();
  };
  if (argc > 1 && argv[1][0] != '-' && !is_verb(argv[1])) {
    std::cerr
        << "memtrain: usage error: unknown verb '" << argv[1]
        << "'; expected train, plan, data, replay, checkpoint, eval, export-hf or supervise (see memtrain --help)\n";
    return memtrain::cli::kExitUsage;
  }
  // The same for the second word of a verb with sub-verbs (`memtrain data frob`).
  if (argc > 2 && argv[1][0] != '-' && argv[2][0] != '-') {
    CLI::App* verb = app.get_subcommand(argv[1]);
    const auto subs = verb->get_subcommands([](CLI::App*) { return true; });
    const auto named = [&](CLI::App* sub) { return sub->get_name() == argv[2]; };
    if (!subs.empty() && std::none_of(subs.begin(), subs.end(), named)) {
      std::string expected;
      for (const CLI::App* sub : subs) expected += (expected.empty() ? "" : ", ") + sub->get_name();
      std::cerr << "memtrain: usage error: unknown " << argv[1] << " subcommand '" << argv[2] << "'; expected "
                << expected << " (see memtrain " << argv[1] << " --help)\n";
      return memtrain::cli::kExitUsage;
    }
  }
  // Note [Verbs that run as one process] (single_process_verbs.hpp). One write of the whole line,
  // so that the messages of two programs of an MPMD launch do not interleave.
  if (const auto refusal =
          memtrain::cli::multi_rank_refusal(argc > 1 ? argv[1] : "", memtrain::comms::process_environment)) {
    if (memtrain::comms::first_rank_of_its_program(memtrain::comms::process_environment)) {
      const std::string line = "memtrain: usage error: " + *refusal + "\n";
      std::fwrite(line.data(), 1, line.size(), stderr);
      std::fflush(stderr);
    }
    return memtrain::cli::kExitUsage;
  }
  // An unknown long option of a verb whose last argument is a command (supervise's `-- mpirun
  // ...`) made CLI11 list the command's words, reversed, as "not expected" without naming the
  // option; a value-taking option right before `--` swallowed it. Both are named here, for every
  // verb and sub-verb (`data prepare`, `checkpoint verify`), before CLI11 parses.
  if (argc > 1 && argv[1][0] != '-') {
    CLI::App* verb = app.get_subcommand(argv[1]);
    std::string verb_name = argv[1];
    int first = 2;
    if (!verb->get_subcommands([](CLI::App*) { return true; }).empty()) {
      // A known sub-verb was checked above; without one, CLI11 says what is missing.
      verb = argc > 2 && argv[2][0] != '-' ? verb->get_subcommand(argv[2]) : nullptr;
      if (verb != nullptr) verb_name += std::string(" ") + argv[2];
      first = 3;
    }
    if (verb != nullptr) {
      for (int i = first; i < argc && std::string(argv[i]) != "--"; ++i) {
        const std::string arg = argv[i];
        if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) continue;
        const std::string name = arg.substr(0, arg.find('='));
        const CLI::Option* option = verb->get_option_no_throw(name);
        if (option == nullptr && name != "--help") {
          std::string expected;
          for (const CLI::Option* o : verb->get_options()) {
            const auto& longs = o->get_lnames();
            if (!longs.empty()) expected += (expected.empty() ? "--" : ", --") + longs.front();
          }
          std::cerr << "memtrain: usage error: unknown option " << memtrain::printable(name, 80) << " of memtrain "
                    << verb_name << "; expected " << expected << " (see memtrain " << verb_name << " --help)\n";
          return memtrain::cli::kExitUsage;
        }
        // An empty value (`--input ""`, `--backoff=`) used to read as "not given" for some
        // options: `eval --input ""` scored the validation split and exited 0.
        const bool inline_value = arg.find('=') != std::string::npos;
        if (option != nullptr && option->get_type_size() > 0 &&
            (inline_value ? arg.size() == arg.find('=') + 1 : i + 1 < argc && argv[i + 1][0] == '\0')) {
          std::cerr << "memtrain: usage error: " << name << ": empty; expected a value, as `memtrain " << verb_name
                    << " --help` says: " << option->get_description() << "\n";
          return memtrain::cli::kExitUsage;
        }
        if (option != nullptr && option->get_type_size() > 0 && !inline_value && i + 1 < argc &&
            std::string(argv[i + 1]) == "--") {
          std::cerr << "memtrain: usage error: " << name << " needs a value before --; expected " << name << " "
                    << option->get_type_name() << "\n";
          return memtrain::cli::kExitUsage;
        }
      }
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "memtrain: usage error: " << memtrain::cli::usage_error_text(e.what(), argc > 1 ? argv[1] : "")
              << "\nRun `memtrain --help` (or `memtrain <verb> --help`) for usage.\n";
    return memtrain::cli::kExitUsage;
  } catch (...) {
    // The message first, then the job ends (Note [One rank's failure ends the job]).
    return memtrain::cli::report_and_end_job(std::current_exception(), std::cerr);
  }
  return exit_code;
}
