#pragma once
// Every rank of a job must run the same config and options (Note [Ranks agree before they
// start]).
#include "comms/communicator.hpp"
#include "runtime/config/config.hpp"
#include "runtime/train/trainer.hpp"

namespace memtrain::train {

// The settings a rank compares with rank 0's: "section.key: value" for every key of
// canonical_yaml(config) but data.cache_dir and training.num_threads (this process's own
// cache and threads), then the command-line options that change what the ranks do together
// (--resume, whether --dry-run, --profile-ops). One line each, in a fixed order.
std::string rank_settings(const Config& config, const RunOptions& options);

// Collective over `world`: compares every rank's rank_settings with rank 0's, and on any
// difference throws ConfigError on every rank, naming the lowest differing rank, its first
// differing setting beside rank 0's, and how many ranks differ. A world of one returns at once.
void check_ranks_agree(comms::Communicator& world, const Config& config, const RunOptions& options);

}  // namespace memtrain::train
