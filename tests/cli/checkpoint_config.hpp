#pragma once
// The config of the checkpoint and resume tests: the tiny mock model (dropout on) with a fixed
// schedule length, so that a run of any max_steps follows the same learning rates.
#include <string>

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

}  // namespace memtrain::cli::testing
