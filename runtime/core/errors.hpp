#pragma once
// The two kinds of failure a user can see, and their exit codes (developers' guide):
// ConfigError -> exit 2 (bad usage, config, or input file: what, where, what was expected);
// RuntimeError -> exit 1 (a run that was set up correctly failed). The CLI catches both and
// prints "memtrain: <kind> error: <message>" on one line.
#include <stdexcept>
#include <string>

namespace memtrain {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace memtrain
