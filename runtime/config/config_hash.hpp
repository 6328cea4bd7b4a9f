#pragma once
// A Config's canonical YAML text and its hash, which identify an experiment in run directories
// and checkpoints (a run directory written by a different config is never overwritten).
#include <string>

#include "runtime/config/config.hpp"

namespace memtrain::train {

// Every key of config_keys(), in that fixed order, with canonical values (shortest round-trip
// numbers, sizes in bytes): two configs that load to the same values give the same text whatever
// their key order, comments, defaults left out or number spelling. Loading the text back gives
// the same Config (path, name and origin aside). Excludes path, name and origin.
std::string canonical_yaml(const Config& config);

// XXH64 (seed 0) of canonical_yaml(config), as 16 lowercase hex digits.
std::string config_hash(const Config& config);

}  // namespace memtrain::train
