#pragma once
// memory.recompute: auto — the least activation recomputation whose dry-run peak fits
// memory.budget (issue 5, "Activation checkpointing").
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "runtime/config/config.hpp"

namespace memtrain::train {

struct RecomputeChoice {
  std::string recompute;                 // none | selective | full
  std::string method = "uniform";        // memory.recompute_method
  int num_layers = 0;                    // memory.recompute_num_layers (0 = every layer)
  std::int64_t peak_reserved_bytes = 0;  // dry-run peak under memory.policy (filled when measured)
  // "none", "selective", "full on the first 3 of 24 layers", "full on every layer".
  std::string describe(int total_layers) const;
};

// Note [Least recomputation first]
// Recomputation costs time, so the candidates are ordered by how much forward work they
// repeat: none < selective (the attention core only, Korthikanti et al. 2022 section 5) <
// full on the first k layers for k = 1, 2, ..., L - 1 (memory.recompute_method block) < full on
// every layer. The first whose peak fits the budget wins; each candidate is one dry-run step
// (plan_step.hpp), a fraction of a second even for BERT-Large.
std::vector<RecomputeChoice> recompute_candidates(int num_hidden_layers);

// When config.memory.recompute is "auto": dry-runs the candidates in order (the trainer's
// first steps and evaluations, measure_step) on one rank of `world_size` (peak reserved bytes under memory.policy, with no device limit),
// and returns a copy of `config` with memory.recompute, recompute_method and
// recompute_num_layers set to the first candidate whose peak is at most memory.budget, after
// logging the choice to `log`. Any other value: returns `config` unchanged.
// Throws ConfigError naming memory.budget, the smallest peak found and its candidate when no
// candidate fits.
Config resolve_recompute(const Config& config, int world_size, std::ostream& log);

}  // namespace memtrain::train
