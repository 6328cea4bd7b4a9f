#pragma once
// The config and checks of the checkpoint, resume and supervisor tests: the tiny mock model (dropout on) with a fixed
// schedule length, so that a run of any max_steps follows the same learning rates.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli::testing {

// kTinyMockYaml with max_steps, lr_decay_steps 5, log_interval 1, checkpoint.interval and
// keep_last 2, written to `name` in the scratch directory; returns its path.
inline std::string checkpoint_config(const Scratch& s, const std::string& name, int max_steps, int interval,
                                     const std::string& extra = "") {
  std::string text = kTinyMockYaml;
  const std::string from = "  max_steps: 2\n";
  text.replace(text.find(from), from.size(),
               "  max_steps: " + std::to_string(max_steps) + "\n  lr_decay_steps: 5\n  log_interval: 1\n");
  text += "checkpoint:\n  interval: " + std::to_string(interval) + "\n  keep_last: 2\n";
  return s.write(name, text + extra);
}

// step -> loss of the training lines of run_dir/metrics.jsonl; a step twice fails the test.
inline std::map<long, double> losses(const Scratch& s, const std::string& run_dir) {
  std::map<long, double> out;
  std::ifstream in(s.path(run_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (!j.contains("loss") || !j.contains("step")) continue;
    EXPECT_TRUE(out.emplace(j["step"].get<long>(), j["loss"].get<double>()).second) << run_dir << ": " << line;
  }
  return out;
}

// Every line of run_dir/metrics.jsonl, parsed.
inline std::vector<nlohmann::json> metrics_lines(const Scratch& s, const std::string& run_dir) {
  std::vector<nlohmann::json> out;
  std::ifstream in(s.path(run_dir + "/metrics.jsonl"));
  for (std::string l; std::getline(in, l);) out.push_back(nlohmann::json::parse(l));
  return out;
}

// The state files of a checkpoint are those of `reference`'s checkpoint of the same step.
inline void expect_same_state(const Scratch& s, const std::string& reference, const std::string& other, int step) {
  char dir[32];
  std::snprintf(dir, sizeof dir, "/checkpoints/step-%08d/", step);
  for (const char* f : {"model-tp00.safetensors", "optimizer-tp00.safetensors", "trainer_state.json"}) {
    const std::string a = slurp(s.path(reference + dir + f));
    EXPECT_FALSE(a.empty()) << reference << dir << f;
    EXPECT_EQ(slurp(s.path(other + dir + f)), a) << other << dir << f;
  }
}

}  // namespace memtrain::cli::testing
