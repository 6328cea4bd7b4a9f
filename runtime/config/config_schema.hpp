#pragma once
// The table of every config key: its name ("section.key"), what it accepts, and how it is read
// from and written back to a Config. The loader, the canonical emitter (config_hash) and
// docs/config.md all follow this one table, so a key cannot be parsed but not hashed.
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/config/config.hpp"

namespace memtrain::train {

struct KeySpec {
  std::string name;      // "model.hidden_size"; the top-level "device" has no section
  std::string expected;  // "an integer in [1, 65536]": the tail of every error message
  // Parses `text` into the Config; throws ValueError (config_value.hpp).
  std::function<void(Config&, std::string_view text)> set;
  // The canonical text of the current value (parses back to the same value).
  std::function<std::string(const Config&)> get;
};

// Every key a Config holds, in canonical order (sections in config_sections() order).
const std::vector<KeySpec>& config_keys();

// "model", "data", "training", "precision", "memory", "parallel", "compression", "checkpoint",
// "health": the sections a config file may have, besides the top-level "device".
const std::vector<std::string>& config_sections();

const KeySpec* find_key(std::string_view name);

// A key that names a feature this build does not have yet (health.*, memory.recompute, ...):
// returns what it would do, for the "not supported yet" message. nullopt for any other key.
std::optional<std::string> not_built_key(std::string_view name);

// The known key closest to `name` (edit distance over "section.key" and over the key alone),
// or "" when nothing is close enough to be a plausible typo.
std::string closest_key(std::string_view name);

}  // namespace memtrain::train
