#pragma once
// How a failure reaches the user: one line on stderr and an exit code (runtime/core/errors.hpp).
#include <exception>
#include <ostream>

namespace memtrain::cli {

inline constexpr int kExitFailure = 1;  // a correctly set-up run failed
inline constexpr int kExitUsage = 2;    // bad usage, config or input file

// Prints `error` as "memtrain: <kind> error: <message>" (an out-of-memory error as
// "memtrain: <message>", its message starts with "out of memory") and returns the exit code:
// 2 for ConfigError, TraceFormatError and std::invalid_argument raised by the verbs' input
// checks; 1 for RuntimeError, OutOfMemory and any other exception.
int exit_status(std::exception_ptr error, std::ostream& err);

}  // namespace memtrain::cli
