#pragma once
// Writes YAML config files for the config tests into a per-test temporary directory, and
// captures the ConfigError message of a load that must fail.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "runtime/core/errors.hpp"
#include "runtime/config/config_loader.hpp"
#include "tests/train/temp_dir.hpp"

namespace memtrain::train::testing {

// A config that loads without touching the corpus: mock data, tiny model.
inline const char* kMinimalYaml =
    "model:\n"
    "  vocab_size: 64\n"
    "  hidden_size: 32\n"
    "  num_attention_heads: 4\n"
    "data:\n"
    "  mock: true\n"
    "  seq_length: 16\n";

class ConfigFiles {
 public:
  // Writes `text` to <tmp>/<name> and returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    const std::string path = dir_.sub(name);
    std::ofstream(path) << text;
    return path;
  }
  std::string dir() const { return dir_.str(); }

 private:
  TempDir dir_;
};

// Whether `text` contains `part`; on failure shows both (plain gtest: no gmock linked).
inline ::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "message:  " << text << "\nexpected to contain: " << part;
}

// The message of the ConfigError that load_config must throw; fails the test when it loads.
inline std::string load_error(const std::string& path, const std::vector<std::string>& overrides = {}) {
  try {
    load_config(path, overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "load_config(" << path << ") did not throw ConfigError";
  return {};
}

}  // namespace memtrain::train::testing
