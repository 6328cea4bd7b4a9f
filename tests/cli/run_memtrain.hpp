#pragma once
// Runs the built memtrain binary as a user would, in a per-test scratch directory, and captures
// its exit code, stdout and stderr.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace memtrain::cli::testing {

// The whole content of `file` ("" when it cannot be read).
inline std::string slurp(const std::string& file) {
  std::ifstream in(file);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Run {
  int exit_code = -1;  // -1: killed by a signal (an abort is a failure of every test)
  std::string out;
  std::string err;
};

class Scratch {
 public:
  Scratch() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() / ("memtrain_cli_" + std::string(info->test_suite_name()) + "_" +
                                                     info->name() + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~Scratch() { std::filesystem::remove_all(dir_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes `text` to <scratch>/<name>; returns the path.
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name)) << text;
    return path(name);
  }

  // `memtrain <args>` run by /bin/sh in the scratch directory; `env` is prefixed
  // ("PATH=/x" etc.). Arguments are shell words: quote them in `args` when needed.
  Run memtrain(const std::string& args, const std::string& env = "") const {
    const std::string binary = std::string(MEMTRAIN_BINARY_DIR) + "/memtrain";
    const std::string command = "cd '" + dir_.string() + "' && " + env + " '" + binary + "' " + args + " >'" +
                                path(".stdout") + "' 2>'" + path(".stderr") + "'";
    const int status = std::system(command.c_str());
    Run run;
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    run.out = slurp(path(".stdout"));
    run.err = slurp(path(".stderr"));
    return run;
  }

  // `mpirun -np <ranks> memtrain <args>` (or with `launch` as the whole command line after
  // the working directory, e.g. a script), under `timeout` so that a hung job fails the test
  // (exit 124) instead of stalling it. --allow-run-as-root only as root, --oversubscribe
  // always (2 cores here, up to 4 ranks).
  // `env` ("NAME=VALUE", or empty) is set for every rank (mpirun -x NAME).
  Run mpirun(int ranks, const std::string& args, const std::string& env = "") const {
    const std::string binary = std::string(MEMTRAIN_BINARY_DIR) + "/memtrain";
    const std::string root = ::geteuid() == 0 ? " --allow-run-as-root" : "";
    const std::string forward = env.empty() ? "" : " -x " + env.substr(0, env.find('='));
    return shell((env.empty() ? "" : env + " ") + "timeout -k 10 300 mpirun --oversubscribe" + root + forward +
                 " -np " + std::to_string(ranks) + " '" + binary + "' " + args);
  }

  // `command` run by /bin/sh in the scratch directory, output captured.
  Run shell(const std::string& command) const {
    const std::string line =
        "cd '" + dir_.string() + "' && " + command + " >'" + path(".stdout") + "' 2>'" + path(".stderr") + "'";
    const int status = std::system(line.c_str());
    Run run;
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    run.out = slurp(path(".stdout"));
    run.err = slurp(path(".stderr"));
    return run;
  }

 private:
  std::filesystem::path dir_;
};

// Removes a test's ledger from /dev/shm when the test ends (a ledger outlives its jobs).
struct LedgerCleanup {
  std::string name;
  ~LedgerCleanup() { std::filesystem::remove("/dev/shm/memtrain-ledger-" + name); }
};

// `Scratch::shell` redirects the last command of its line: a group keeps every command's output,
// and the leading `true;` keeps the group in the scratch directory the shell changed into.
inline std::string grouped(const std::string& commands) { return "true; { " + commands + "; }"; }

inline std::string memtrain_binary() { return std::string(MEMTRAIN_BINARY_DIR) + "/memtrain"; }

// The exit code a shell line printed as "key=N" (-100 when it printed none).
inline int printed_code(const std::string& out, const std::string& key) {
  const auto p = out.find(key + "=");
  return p == std::string::npos ? -100 : std::stoi(out.substr(p + key.size() + 1));
}

inline ::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "output:  " << text << "\nexpected to contain: " << part;
}

// A model small enough to build in milliseconds, on mock data (no corpus needed).
inline const char* kTinyMockYaml =
    "model:\n"
    "  vocab_size: 64\n"
    "  hidden_size: 32\n"
    "  num_hidden_layers: 1\n"
    "  num_attention_heads: 4\n"
    "  intermediate_size: 64\n"
    "  max_position_embeddings: 16\n"
    "data:\n"
    "  mock: true\n"
    "  seq_length: 16\n"
    "training:\n"
    "  micro_batch_size: 2\n"
    "  global_batch_size: 2\n"
    "  max_steps: 2\n"
    "  eval_steps: 1\n";

}  // namespace memtrain::cli::testing
