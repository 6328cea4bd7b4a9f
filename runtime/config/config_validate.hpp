#pragma once
// Rules that involve more than one key, or the machine (corpus files, the `bible` program).
#include <string>

#include "runtime/config/config.hpp"

namespace memtrain::train {

// Throws memtrain::ConfigError ("<where>: <key> = <value>: <what>; expected <...>") for the first
// rule `config` breaks. <where> comes from config.origin, or "<file> (default)" for a key left
// at its default.
void validate_config(const Config& config);

// Where `key` was set, for messages: config.origin[key] or "<config.path> (default)".
std::string where_set(const Config& config, const std::string& key);

// Searches PATH for an executable named `program`, as a shell would. Empty when not found.
std::string find_program(const std::string& program);

}  // namespace memtrain::train
